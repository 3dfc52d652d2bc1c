"""Answers a turn does not take as they are: an empty one (a hint, then the
turn fails), calls past the step's maxToolCalls (none of them runs), a
coordinator's finalize that may not end the run yet."""

from __future__ import annotations

from typing import Any

from agents import bounded_json
from agents.llm.base import Completion, ToolCallRequest
from agents.runner.turn import ToolEnv
from agents.tools.base import Role
from agents.tools.errors import RetryHint, failure_text
from agents.tools.registry import ToolOutcome, ToolRegistry

# Why a step (or the run, for the coordinator) fails; stored as its error.
EMPTY_ANSWER = "empty answer from the model"
EMPTY_FINALIZE = "finalize with an empty result"
FINALIZE = "finalize"
# A finalize in the wake that spawned workers would give the run its result
# before they ran: the coordinator is woken with their results instead.
AWAITED_WORKERS = "finalize refused: workers spawned in this wake have not run yet"
SPAWN_WORKER = "spawn_worker"
# Calls of any kind one answer may ask for, bookkeeping (messages, claims)
# included, which no call cap counts: each is a row and events, and a
# coordinator forwarding to every step of a workflow needs at most 100.
MAX_CALLS_PER_TURN = 100


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


def empty_answers_in_a_row(transcript: list[dict[str, Any]]) -> int:
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


def over_call_cap(calls: list[ToolCallRequest], registry: ToolRegistry, env: ToolEnv) -> str | None:
    """Why none of this turn's calls may run: it asks for more calls than a
    turn may make (MAX_CALLS_PER_TURN), or more counted calls than the step
    has left under maxToolCalls. All or none, so that the model decides
    which calls matter rather than the cap cutting the list."""
    if len(calls) > MAX_CALLS_PER_TURN:
        return (
            f"this turn asks for {len(calls)} tool calls and a turn may make at most {MAX_CALLS_PER_TURN}, "
            f"messages and claims included; none of them ran: ask for at most {MAX_CALLS_PER_TURN}"
        )
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


def finalize_refusal(arguments: str, needs_workers: bool, awaited_workers: int = 0) -> str | None:
    """Why a coordinator's finalize does not end the run: no worker yet
    (coordinator.requireWorkers), workers spawned in this wake that have
    not run (AWAITED_WORKERS), or an empty summary (EMPTY_FINALIZE)."""
    if needs_workers:
        return (
            "finalize refused: this workflow's coordinator must plan the work with spawn_worker "
            "(coordinator.requireWorkers) and no worker has been spawned"
        )
    if awaited_workers:
        return (
            f"{AWAITED_WORKERS} ({awaited_workers}); end this turn, and you are woken with their results "
            "once they finish: finalize then"
        )
    try:
        summary = bounded_json.loads(arguments or "{}").get("summary")
    except (ValueError, AttributeError):
        return None  # the registry explains malformed arguments
    if isinstance(summary, str) and not summary.strip():
        return EMPTY_FINALIZE
    return None


def cap_exhausted(env: ToolEnv) -> bool:
    """Whether the step has no call left under maxToolCalls."""
    return env.tool_call_cap is not None and env.tool_calls_made >= env.tool_call_cap


def refused_call(reason: str, over_cap: bool, env: ToolEnv) -> ToolOutcome:
    if over_cap:
        exhausted = cap_exhausted(env)
        hint = RetryHint("domain_rejection", "finish" if exhausted else "replan")
    elif reason == EMPTY_FINALIZE:
        hint = RetryHint("invalid_call", "finish", fields=["summary"])
    elif reason.startswith(AWAITED_WORKERS):
        hint = RetryHint("domain_rejection", "finish")
    else:
        hint = RetryHint(
            "domain_rejection",
            "replan",
            question="Which workers does the task need? Call spawn_worker for each, then finalize once they finish.",
        )
    # Refused calls did not run: they count as failures, not against the call caps.
    return ToolOutcome(failure_text(reason, hint), ok=False, error_kind=hint.kind, counted=False)
