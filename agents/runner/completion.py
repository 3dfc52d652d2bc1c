"""Recording a model's answer: the inbox it saw drained, the turn and its
tool calls emitted as events, the calls run in order."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agents import metrics
from agents.events import Event, EventSink
from agents.events.run_events import AgentTurn
from agents.events.tool_events import ToolCall
from agents.llm.base import Completion, CompletionRequest, ToolCallRequest
from agents.router import MessageRouter, RouterMessage
from agents.runner.answer_checks import (
    EMPTY_ANSWER,
    EMPTY_FINALIZE,
    FINALIZE,
    SPAWN_WORKER,
    cap_exhausted,
    empty_answer_hint,
    empty_answers_in_a_row,
    finalize_refusal,
    is_empty,
    over_call_cap,
    refused_call,
)
from agents.runner.prompts import PREVIEW_CHARS, capped
from agents.runner.tool_calls import redacted_raw, tool_context, with_occurrence
from agents.runner.turn import AgentSession, ToolCallRecord, ToolEnv, TurnResult
from agents.tools.base import Tool
from agents.tools.registry import ToolOutcome, ToolRegistry


def apply_completion(
    turn: AgentSession,
    request: CompletionRequest,
    completion: Completion,
    inbox: list[RouterMessage],
    *,
    router: MessageRouter,
    registry: ToolRegistry,
    tools: list[Tool],
) -> TurnResult:
    """Record a model's answer: drain the inbox it saw, emit the turn, run its
    tool calls in order; its events go to the router's sink, with the
    messages it routes. Raises DoubleDrainError if another worker already
    delivered the same messages (the caller's transaction must roll back)."""
    sink = router.sink
    # Only what the model was shown: messages that arrived while it was
    # thinking stay unread for the next turn.
    router.drain(turn.step_id, only=inbox)
    transcript = list(request.messages)
    empty = turn.empty_answer_retries is not None and is_empty(completion)
    message = completion.as_message()
    if empty:
        # A null content with no tool call is a message some endpoints refuse to read back.
        message["content"] = completion.content or ""
    transcript.append(message)
    misses = empty_answers_in_a_row(transcript) if empty else 0
    sink.emit(Event.of(_turn_event(turn, completion, misses if empty else None), turn.step_id))
    result = _result_of(completion, transcript)
    if empty:
        return _after_empty_answer(turn, result, misses)
    calls = _Calls(turn, turn.env or ToolEnv(), router, sink, registry, tools, result)
    calls.run_all(completion.tool_calls)
    if result.error:
        result.status = "failed"
    return result


def _turn_event(turn: AgentSession, completion: Completion, empty_answer: int | None) -> AgentTurn:
    """The turn's event; ``empty_answer`` (empty answers in a row) is stored
    only for an empty answer."""
    usage = completion.usage
    extra: dict[str, Any] = {"empty_answer": empty_answer} if empty_answer is not None else {}
    if completion.call is not None:
        facts = completion.call
        extra |= {"model": facts.model, "latency_ms": facts.latency_ms, "retries": facts.retries}
        # Only these two end a turn; any other reason fails the call (agents/llm/openai_stream.py).
        extra["finish_reason"] = "tool_calls" if completion.tool_calls else "stop"
    return AgentTurn(
        turn=turn.turn,
        agent=turn.agent_name,
        content=capped(completion.content or "", PREVIEW_CHARS),
        tool_calls=[call.name for call in completion.tool_calls],
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        **extra,
    )


def _result_of(completion: Completion, transcript: list[dict[str, Any]]) -> TurnResult:
    usage = completion.usage
    return TurnResult(
        status="continue" if completion.tool_calls else "completed",
        transcript=transcript,
        output=completion.content or "",
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
    )


def _after_empty_answer(turn: AgentSession, result: TurnResult, misses: int) -> TurnResult:
    """An empty answer fails the turn past the retries allowed; before, the
    model gets to fix it: the hint is the next thing it reads."""
    cap = turn.empty_answer_retries or 0
    if misses > cap:
        result.status, result.error = "failed", EMPTY_ANSWER
    else:
        result.status = "continue"
        result.transcript.append({"role": "user", "content": empty_answer_hint(turn.role, misses, cap)})
    return result


def _end_fields(outcome: ToolOutcome) -> dict[str, Any]:
    """What a call's end event stores beyond its result: only what applies
    (a call that ran has no "pending")."""
    end: dict[str, Any] = {}
    if outcome.error_kind:
        end["error_kind"] = outcome.error_kind
    if outcome.bounds is not None:
        end["bounds"] = outcome.bounds.as_data()
    if outcome.omitted:
        end["omitted"] = True
    if outcome.artifacts:
        end["artifacts"] = [{"kind": a.kind, "title": a.title} for a in outcome.artifacts]
    if outcome.pending:
        end |= _pending_fields(outcome)
    return end


def _pending_fields(outcome: ToolOutcome) -> dict[str, Any]:
    """A call whose result comes later: what it waits on."""
    waits_on = {"queued": outcome.queued, "child_run_id": outcome.child_run_id, "approval_id": outcome.approval_id}
    return {"pending": True} | {name: value for name, value in waits_on.items() if value}


@dataclass
class _Calls:
    """A turn's tool calls, run in order: each emits its start and end
    events and adds its record and its answer to ``result``."""

    turn: AgentSession
    env: ToolEnv
    router: MessageRouter
    sink: EventSink
    registry: ToolRegistry
    tools: list[Tool]
    result: TurnResult

    def run_all(self, calls: list[ToolCallRequest]) -> None:
        # Over the cap, none runs: each call of the turn gets its own error, keyed by its id.
        over_cap = over_call_cap(calls, self.registry, self.env)
        if over_cap is not None:
            self.result.over_call_cap = True
            self.result.call_cap_exhausted = cap_exhausted(self.env)
        workers, awaited = self.env.workers, self.env.awaited_workers
        for call, occurrence in with_occurrence(calls):
            refusal = over_cap if over_cap is not None else self._finalize_refusal(call, workers, awaited)
            outcome = self._run(call, occurrence, refusal, over_cap is not None)
            if call.name == SPAWN_WORKER and outcome.ok:
                workers += 1
                awaited += 1

    def _finalize_refusal(self, call: ToolCallRequest, workers: int, awaited: int) -> str | None:
        """Why the coordinator's finalize is refused, if it is."""
        if call.name != FINALIZE or self.turn.role != "coordinator":
            return None
        refusal = finalize_refusal(call.arguments, self.env.require_workers and not workers, awaited)
        if refusal == EMPTY_FINALIZE:
            self.result.error = EMPTY_FINALIZE
        return refusal

    def _run(self, call: ToolCallRequest, occurrence: int, refusal: str | None, over_cap: bool) -> ToolOutcome:
        turn, sink = self.turn, self.sink
        ctx = tool_context(turn, self.env, call.id, self.router, sink, occurrence)
        raw_arguments = redacted_raw(call.arguments, self.registry.get(call.name))
        start = ToolCall(
            phase="start",
            tool_call_id=call.id,
            name=call.name,
            arguments=capped(raw_arguments, PREVIEW_CHARS),
            meta=ctx.meta.as_data(),
        )
        sink.emit(Event.of(start, turn.step_id))
        started = time.monotonic()
        if refusal is not None:
            outcome = refused_call(refusal, over_cap, self.env)
        else:
            outcome = self.registry.call(ctx, call.name, call.arguments, self.tools)
        duration_ms = int((time.monotonic() - started) * 1000)
        if outcome.pending:
            self.result.status = "waiting"
        ended = ToolCall(
            phase="end",
            tool_call_id=call.id,
            name=call.name,
            ok=outcome.ok,
            result=capped(outcome.text, PREVIEW_CHARS),
            duration_ms=duration_ms,
            **_end_fields(outcome),
        )
        sink.emit(Event.of(ended, turn.step_id))
        metrics.tool_call_ended(call.name, outcome.ok, bool(outcome.pending))
        self.result.transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        self.result.tool_calls.append(ToolCallRecord(ctx.meta, call.name, raw_arguments, outcome, duration_ms))
        if ctx.finalized:
            self.result.finalized = ctx.finalized[-1]
        return outcome
