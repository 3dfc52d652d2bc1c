"""Recording a model's answer: the inbox it saw drained, the turn and its
tool calls emitted as events, the calls run in order."""

from __future__ import annotations

import time
from typing import Any

from agents.events import Event, EventSink
from agents.events.run_events import AgentTurn as AgentTurnEvent
from agents.events.tool_events import ToolCall
from agents.llm.base import Completion, CompletionRequest
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
from agents.runner.turn import AgentTurn, ToolCallRecord, ToolEnv, TurnResult
from agents.tools.base import Tool
from agents.tools.registry import ToolRegistry


def apply_completion(
    turn: AgentTurn,
    request: CompletionRequest,
    completion: Completion,
    inbox: list[RouterMessage],
    *,
    router: MessageRouter,
    sink: EventSink,
    registry: ToolRegistry,
    tools: list[Tool],
) -> TurnResult:
    """Record a model's answer: drain the inbox it saw, emit the turn, run its
    tool calls in order. Raises DoubleDrainError if another worker already
    delivered the same messages (the caller's transaction must roll back)."""
    # Only what the model was shown: messages that arrived while it was
    # thinking stay unread for the next turn.
    router.drain(turn.step_id, only=inbox)
    transcript = list(request.messages)
    message = completion.as_message()
    empty = turn.empty_answer_retries is not None and is_empty(completion)
    if empty:
        # A null content with no tool call is a message some endpoints refuse to read back.
        message["content"] = completion.content or ""
    transcript.append(message)
    usage = completion.usage
    misses = empty_answers_in_a_row(transcript) if empty else 0
    # empty_answer is stored only for an empty answer.
    empty_answer: dict[str, Any] = {"empty_answer": misses} if empty else {}
    agent_turn = AgentTurnEvent(
        turn=turn.turn,
        agent=turn.agent_name,
        content=capped(completion.content or "", PREVIEW_CHARS),
        tool_calls=[call.name for call in completion.tool_calls],
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        **empty_answer,
    )
    sink.emit(Event.of(agent_turn, turn.step_id))
    result = TurnResult(
        status="continue" if completion.tool_calls else "completed",
        transcript=transcript,
        output=completion.content or "",
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
    )
    if empty:
        cap = turn.empty_answer_retries or 0
        if misses > cap:
            result.status, result.error = "failed", EMPTY_ANSWER
        else:
            # The model gets to fix it: the hint is the next thing it reads.
            result.status = "continue"
            transcript.append({"role": "user", "content": empty_answer_hint(turn.role, misses, cap)})
        return result
    env = turn.env or ToolEnv()
    over_cap = over_call_cap(completion.tool_calls, registry, env)
    if over_cap is not None:
        result.over_call_cap = True
        result.call_cap_exhausted = cap_exhausted(env)
    workers = env.workers
    for call, occurrence in with_occurrence(completion.tool_calls):
        ctx = tool_context(turn, env, call.id, router, sink, occurrence)
        meta = ctx.meta
        raw_arguments = redacted_raw(call.arguments, registry.get(call.name))
        start = ToolCall(
            phase="start",
            tool_call_id=call.id,
            name=call.name,
            arguments=capped(raw_arguments, PREVIEW_CHARS),
            meta=meta.as_data(),
        )
        sink.emit(Event.of(start, turn.step_id))
        started = time.monotonic()
        refusal = over_cap
        if refusal is None and call.name == FINALIZE and turn.role == "coordinator":
            refusal = finalize_refusal(call.arguments, env.require_workers and not workers)
            if refusal == EMPTY_FINALIZE:
                result.error = EMPTY_FINALIZE
        if refusal is not None:
            # Not run: each call of the turn gets its own error, keyed by its id.
            outcome = refused_call(refusal, over_cap is not None, env)
        else:
            outcome = registry.call(ctx, call.name, call.arguments, tools)
        if call.name == SPAWN_WORKER and outcome.ok:
            workers += 1
        duration_ms = int((time.monotonic() - started) * 1000)
        # Only what applies is stored: a call that ran has no "pending".
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
            end["pending"] = True
            if outcome.queued:
                end["queued"] = True
            if outcome.child_run_id:
                end["child_run_id"] = outcome.child_run_id
            if outcome.approval_id:
                end["approval_id"] = outcome.approval_id
            result.status = "waiting"
        ended = ToolCall(
            phase="end",
            tool_call_id=call.id,
            name=call.name,
            ok=outcome.ok,
            result=capped(outcome.text, PREVIEW_CHARS),
            duration_ms=duration_ms,
            **end,
        )
        sink.emit(Event.of(ended, turn.step_id))
        transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        result.tool_calls.append(ToolCallRecord(meta, call.name, raw_arguments, outcome, duration_ms))
        if ctx.finalized:
            result.finalized = ctx.finalized[-1]
    if result.error:
        result.status = "failed"
    return result
