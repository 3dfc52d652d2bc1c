"""One step-agent turn, and one coordinator wake round.

A turn is split in two so that no database transaction is held open while a
model thinks: ``step_request`` builds what to ask the model, the caller asks
it, and ``apply_step_completion`` records the answer (drains the inbox, runs
the tool calls, emits events). zenweb runs the second half in one
transaction, so a turn either happened entirely or not at all; a turn that
crashed before committing is simply asked again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from agents.events import Event, EventSink
from agents.llm.base import Completion, CompletionRequest, ToolCallRequest
from agents.router import COORDINATOR, MessageRouter, RouterMessage
from agents.sandbox import Sandbox
from agents.spec import DEFAULT_EMPTY_ANSWER_RETRIES, AgentSpec
from agents.tools.base import INJECTED, Role, Tool, ToolCallMeta, ToolContext, ToolHost, ToolJournal
from agents.tools.errors import RetryHint, failure_text
from agents.tools.registry import ToolOutcome, ToolRegistry, idempotency_key

TRUNCATION_MARKER = "...[truncated for context limit]"
MAX_DEPENDENCY_CHARS = 8 * 1024
MAX_PROMPT_CHARS = 120 * 1024
PREVIEW_CHARS = 2000
# Why a step (or the run, for the coordinator) fails; stored as its error.
EMPTY_ANSWER = "empty answer from the model"
EMPTY_FINALIZE = "finalize with an empty result"
FINALIZE = "finalize"
SPAWN_WORKER = "spawn_worker"


@dataclass
class AgentTurn:
    """Who is taking a turn, and everything said so far."""

    run_id: str
    step_id: str
    agent_name: str
    agent: AgentSpec
    role: Role
    transcript: list[dict[str, Any]]
    variables: dict[str, str] = field(default_factory=dict)
    env: ToolEnv | None = None
    # Empty answers in a row answered with a hint before the turn fails
    # (options.maxEmptyAnswerRetries); None: an empty answer is a plain
    # answer (a coordinator with nothing to route).
    empty_answer_retries: int | None = DEFAULT_EMPTY_ANSWER_RETRIES

    @property
    def turn(self) -> int:
        """1-based number of the turn about to be taken."""
        return sum(1 for m in self.transcript if m.get("role") == "assistant") + 1


@dataclass
class ToolEnv:
    """What a turn's tools get besides the router: the run store (for
    spawn_worker and child runs), the run's workspace, the values of injected
    argument fields, and whether destructive work was approved."""

    host: ToolHost | None = None
    workspace: Path | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    destructive_approved: bool = False
    parent_tool_call_id: str = ""
    gated: frozenset[str] = frozenset()
    # The calls shown when a destructive workflow was approved (ToolContext.bound).
    bound: frozenset[str] | None = None
    journal: ToolJournal | None = None
    # Service-backed calls come back queued; the host runs each as a task.
    defer: bool = False
    # options.maxToolCalls and the counted calls the step made before this
    # turn: a turn asking for more than is left runs none of its calls.
    tool_call_cap: int | None = None
    tool_calls_made: int = 0
    # coordinator.requireWorkers, and the workers the run had before this turn.
    require_workers: bool = False
    workers: int = 0
    # How tool processes start (None: the default sandbox).
    sandbox: Sandbox | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    meta: ToolCallMeta
    name: str
    # The model's raw argument text, injected fields masked.
    arguments: str
    outcome: ToolOutcome
    duration_ms: int

    @property
    def tool_call_id(self) -> str:
        return self.meta.tool_call_id

    @property
    def result(self) -> str:
        return self.outcome.text

    @property
    def ok(self) -> bool:
        return self.outcome.ok


@dataclass
class TurnResult:
    """``waiting`` means a tool call's result comes later (a child run);
    ``failed``, that the turn ends its step (or, the coordinator's, its run)
    for ``error``. ``over_call_cap``: the turn asked for more tool calls than
    the step had left, and none ran; ``call_cap_exhausted``: it had none left."""

    status: Literal["continue", "completed", "waiting", "failed"]
    transcript: list[dict[str, Any]]
    output: str = ""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    finalized: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    over_call_cap: bool = False
    call_cap_exhausted: bool = False


def step_prompt(instructions: str, dependency_outputs: dict[str, str]) -> str:
    """The first user message of a step: its instructions, then what its
    dependencies produced, each capped so one chatty step cannot crowd out
    the rest."""
    parts = [instructions.strip() or "Do your part of the workflow."]
    for step_id, output in dependency_outputs.items():
        parts.append(f"## Output of step {step_id}\n{_cap(output, MAX_DEPENDENCY_CHARS)}")
    return _cap("\n\n".join(parts), MAX_PROMPT_CHARS)


def step_system_prompt(step_id: str, agent: AgentSpec) -> str:
    rules = (
        f"You are the agent of step '{step_id}' in a zenweb workflow. You cannot talk to other "
        "steps directly: call send_message to tell the coordinator something, and it decides "
        "whether to forward it. Messages forwarded to you appear as user messages. When your "
        "part is done, answer with your result and no tool call."
    )
    return f"{agent.system.strip()}\n\n{rules}" if agent.system.strip() else rules


def inbox_text(messages: list[RouterMessage]) -> str:
    return "\n\n".join(f"[message {m.message_id} from {m.sender} ({m.type})]\n{m.content}" for m in messages)


def build_request(
    turn: AgentTurn,
    tools: list[Tool],
    inbox: list[RouterMessage],
    extra_user: str = "",
    *,
    deadline: float | None = None,
) -> CompletionRequest:
    """The conversation so far plus what arrived since: drained messages become
    one user message with a header naming each sender. ``deadline``: see
    CompletionRequest."""
    messages = list(turn.transcript)
    added = "\n\n".join(part for part in (inbox_text(inbox), extra_user) if part)
    if added:
        messages.append({"role": "user", "content": added})
    return CompletionRequest(
        agent=turn.agent_name,
        messages=messages,
        tools=[tool.schema() for tool in tools],
        model=turn.agent.model,
        temperature=turn.agent.temperature,
        variables=turn.variables,
        deadline=deadline,
    )


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
    data: dict[str, Any] = {
        "turn": turn.turn,
        "agent": turn.agent_name,
        "content": _cap(completion.content or "", PREVIEW_CHARS),
        "tool_calls": [call.name for call in completion.tool_calls],
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "completion_tokens": usage.completion_tokens if usage else None,
    }
    misses = _empty_answers_in_a_row(transcript) if empty else 0
    if empty:
        data["empty_answer"] = misses
    sink.emit(Event("agent_turn", turn.step_id, data))
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
    over_cap = _over_call_cap(completion.tool_calls, registry, env)
    if over_cap is not None:
        result.over_call_cap = True
        result.call_cap_exhausted = env.tool_calls_made >= (env.tool_call_cap or 0)
    workers = env.workers
    for call, occurrence in _with_occurrence(completion.tool_calls):
        ctx = _tool_context(turn, env, call.id, router, sink, occurrence)
        meta = ctx.meta
        raw_arguments = _redacted_raw(call.arguments, registry.get(call.name))
        sink.emit(
            Event(
                "tool_call",
                turn.step_id,
                {
                    "phase": "start",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "arguments": _cap(raw_arguments, PREVIEW_CHARS),
                    "meta": meta.as_data(),
                },
            )
        )
        started = time.monotonic()
        refusal = over_cap
        if refusal is None and call.name == FINALIZE and turn.role == "coordinator":
            refusal = _finalize_refusal(call.arguments, env.require_workers and not workers)
            if refusal == EMPTY_FINALIZE:
                result.error = EMPTY_FINALIZE
        if refusal is not None:
            # Not run: each call of the turn gets its own error, keyed by its id.
            outcome = _refused(refusal, over_cap is not None, env)
        else:
            outcome = registry.call(ctx, call.name, call.arguments, tools)
        if call.name == SPAWN_WORKER and outcome.ok:
            workers += 1
        duration_ms = int((time.monotonic() - started) * 1000)
        end: dict[str, Any] = {
            "phase": "end",
            "tool_call_id": call.id,
            "name": call.name,
            "ok": outcome.ok,
            "result": _cap(outcome.text, PREVIEW_CHARS),
            "duration_ms": duration_ms,
        }
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
        sink.emit(Event("tool_call", turn.step_id, end))
        transcript.append({"role": "tool", "tool_call_id": call.id, "content": outcome.text})
        result.tool_calls.append(ToolCallRecord(meta, call.name, raw_arguments, outcome, duration_ms))
        if ctx.finalized:
            result.finalized = ctx.finalized[-1]
    if result.error:
        result.status = "failed"
    return result


def is_empty(completion: Completion) -> bool:
    """An answer with no text (whitespace is none) and no tool call."""
    return not completion.tool_calls and not (completion.content or "").strip()


def empty_answer_hint(role: Role, retry: int, cap: int) -> str:
    """What the model reads after its ``retry``-th empty answer in a row."""
    what = (
        "Call one of your tools; finalize(summary) gives the run its result once the work is done."
        if role == "coordinator"
        else "Answer with your result as text, or call one of your tools."
    )
    ends = "the run" if role == "coordinator" else "the step"
    return (
        f"Your answer was empty: no text and no tool call. {what} "
        f'(Retry {retry} of {cap}: one more empty answer fails {ends} with "{EMPTY_ANSWER}".)'
    )


def _empty_answers_in_a_row(transcript: list[dict[str, Any]]) -> int:
    """How many of the last assistant messages were empty, counting back to
    the last one that said or called something."""
    count = 0
    for message in reversed(transcript):
        if message.get("role") != "assistant":
            continue
        if message.get("tool_calls") or (message.get("content") or "").strip():
            break
        count += 1
    return count


def _over_call_cap(calls: list[ToolCallRequest], registry: ToolRegistry, env: ToolEnv) -> str | None:
    """Why none of this turn's calls may run: it asks for more counted calls
    than the step has left under maxToolCalls. All or none, so that the
    model decides which calls matter rather than the cap cutting the list."""
    if env.tool_call_cap is None or not calls:
        return None
    left = max(env.tool_call_cap - env.tool_calls_made, 0)
    # Bookkeeping (messaging) does not count; an unknown tool does, as the registry counts it.
    asked = sum(1 for call in calls if not ((tool := registry.get(call.name)) and tool.bookkeeping))
    if asked <= left:
        return None
    if left == 0:
        return f"the step has made all {env.tool_call_cap} tool calls it may make (maxToolCalls); no call ran"
    return (
        f"this turn asks for {asked} tool calls and the step has {left} of {env.tool_call_cap} left (maxToolCalls); "
        f"none of them ran: ask for at most {left}"
    )


def _finalize_refusal(arguments: str, needs_workers: bool) -> str | None:
    """Why a coordinator's finalize does not end the run: no worker yet
    (coordinator.requireWorkers), or an empty summary (EMPTY_FINALIZE)."""
    if needs_workers:
        return (
            "finalize refused: this workflow's coordinator must plan the work with spawn_worker "
            "(coordinator.requireWorkers) and no worker has been spawned"
        )
    try:
        summary = json.loads(arguments or "{}").get("summary")
    except (json.JSONDecodeError, AttributeError):
        return None  # the registry explains malformed arguments
    if isinstance(summary, str) and not summary.strip():
        return EMPTY_FINALIZE
    return None


def _refused(reason: str, over_cap: bool, env: ToolEnv) -> ToolOutcome:
    if over_cap:
        exhausted = env.tool_calls_made >= (env.tool_call_cap or 0)
        hint = RetryHint("domain_rejection", "finish" if exhausted else "replan")
    elif reason == EMPTY_FINALIZE:
        hint = RetryHint("invalid_call", "finish", fields=["summary"])
    else:
        hint = RetryHint(
            "domain_rejection",
            "replan",
            question="Which workers does the task need? Call spawn_worker for each, then finalize once they finish.",
        )
    # Refused calls did not run: they count as failures, not against the call caps.
    return ToolOutcome(failure_text(reason, hint), ok=False, error_kind=hint.kind, counted=False)


def run_side_effects(
    turn: AgentTurn,
    completion: Completion,
    *,
    registry: ToolRegistry,
    tools: list[Tool],
    journal: JournalWriter,
) -> int:
    """Run the side-effecting calls of a completion before its turn is
    recorded, keeping each result in ``journal`` as soon as it exists. The
    turn's transaction then finds them there (apply_completion with
    ``env.journal``) and a retry of a turn whose worker died does not run a
    finished call again. Returns how many calls ran."""
    env = turn.env or ToolEnv()
    ran = 0
    if env.defer:
        return ran  # they run as tasks, each journaled there
    if _over_call_cap(completion.tool_calls, registry, env) is not None:
        return ran  # the turn asks for more calls than the step has left: none runs
    for call, occurrence in _with_occurrence(completion.tool_calls):
        tool = registry.get(call.name)
        if tool is None or not tool.side_effects or tool.name in env.gated or tool not in tools:
            continue
        # Messages and events belong to the turn's transaction: these tools use neither.
        ctx = _tool_context(turn, env, call.id, None, None, occurrence)  # type: ignore[arg-type]
        try:
            key = idempotency_key(ctx, tool.name, _validated(tool, ctx, call.arguments))
        except ValueError:
            continue  # invalid arguments: the turn reports them, nothing runs
        if journal.get(key) is not None:
            continue
        journal.begin(key, tool.name)
        ctx.journal = None
        outcome = registry.call(ctx, call.name, call.arguments, tools)
        journal.finish(key, outcome)
        ran += 1
    return ran


class JournalWriter(ToolJournal, Protocol):
    def begin(self, key: str, name: str) -> None:
        """Record (durably, at once) that a call is about to run."""
        ...

    def finish(self, key: str, outcome: ToolOutcome) -> None:
        """Record (durably, at once) what the call returned."""
        ...


def _with_occurrence(calls: list[ToolCallRequest]) -> list[tuple[ToolCallRequest, int]]:
    seen: dict[tuple[str, str], int] = {}
    numbered = []
    for call in calls:
        key = (call.name, call.arguments)
        numbered.append((call, seen.get(key, 0)))
        seen[key] = seen.get(key, 0) + 1
    return numbered


def _tool_context(
    turn: AgentTurn, env: ToolEnv, call_id: str, router: MessageRouter, sink: EventSink, occurrence: int
) -> ToolContext:
    return ToolContext(
        meta=ToolCallMeta(
            run_id=turn.run_id,
            session_id=f"{turn.run_id}/{turn.step_id}",
            turn_id=f"{turn.step_id}/{turn.turn}",
            tool_call_id=call_id,
            parent_tool_call_id=env.parent_tool_call_id,
        ),
        step_id=turn.step_id,
        role=turn.role,
        router=router,
        sink=sink,
        host=env.host,
        workspace=env.workspace,
        injected={
            **env.injected,
            "run_id": turn.run_id,
            **({"workspace": str(env.workspace)} if env.workspace else {}),
        },
        destructive_approved=env.destructive_approved,
        gated=env.gated,
        bound=env.bound,
        journal=env.journal,
        occurrence=occurrence,
        defer=env.defer,
        sandbox=env.sandbox,
    )


def _validated(tool: Tool, ctx: ToolContext, raw: str) -> dict[str, Any]:
    """The call's arguments as the registry will validate them; ValueError if they do not."""
    try:
        data = json.loads(raw or "{}")
        if not isinstance(data, dict):
            raise ValueError("not an object")
        data = {**data, **{key: ctx.injected.get(key) for key in tool.injected}}
        return tool.args_model.model_validate(data).model_dump(mode="json")
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ValueError(str(exc)) from None


def new_step_transcript(step_id: str, agent: AgentSpec, prompt: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": step_system_prompt(step_id, agent)},
        {"role": "user", "content": prompt},
    ]


def _redacted_raw(arguments: str, tool: Tool | None) -> str:
    """The raw arguments for an event, with any injected field masked."""
    if tool is None or not tool.injected:
        return arguments
    try:
        data = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return arguments
    if isinstance(data, dict):
        data = {key: (INJECTED if key in tool.injected else value) for key, value in data.items()}
    return json.dumps(data)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER


__all__ = [
    "COORDINATOR",
    "EMPTY_ANSWER",
    "EMPTY_FINALIZE",
    "AgentTurn",
    "ToolCallRecord",
    "ToolEnv",
    "run_side_effects",
    "TurnResult",
    "apply_completion",
    "build_request",
    "empty_answer_hint",
    "inbox_text",
    "is_empty",
    "new_step_transcript",
    "step_prompt",
]
