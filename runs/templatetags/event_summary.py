"""One line saying what an event means, for the event stream, the replay's
recent events and ``manage.py run_workflow``: the stored row read back as
its model (agents.events.parse), one line per model class. Plain text: the
template (or ``event_rows``) escapes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.events import EventData, EventDataError, parse
from agents.events import run_events as run
from agents.events import tool_events as tool

SUMMARY_CHARS = 240


def _short(text: object) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _tool_call(e: tool.ToolCall) -> str:
    if e.phase == "start":
        return f"{e.name}({e.arguments or ''})"
    return f"{e.name} → {e.result or ''}"


def _agent_turn(e: run.AgentTurn) -> str:
    calls = ", ".join(e.tool_calls)
    return f"turn {e.turn}: " + (f"calls {calls}" if calls else e.content)


def _provider_retry(e: run.ProviderRetry) -> str:
    what = f"HTTP {e.status}" if e.status is not None else "no answer"
    return f"{what}, attempt {e.attempt}, retrying in {e.wait}s: {e.message}"


def _over_budget(e: run.CoordinatorOverBudget) -> str:
    sent = f", sent {e.compact_tokens} compact" if e.compacted else ""
    return f"{e.reason} prompt {e.prompt_tokens} tokens, budget {e.budget_tokens}{sent}"


def _tool_result(e: tool.ToolResult) -> str:
    outcome = "ok" if e.ok else e.error_kind or e.status
    return f"{e.name}: {outcome} in {e.duration_ms} ms"


# Model class -> its line. A type without one (step_start, agent_idle...)
# says nothing beyond its type and step.
SAYS: dict[type[EventData], Callable[[Any], str]] = {
    run.MessageSent: lambda e: f"{e.sender} → {e.to} ({e.msg_type}): {e.content}",
    run.MessageDropped: lambda e: f"{e.sender} → {e.to} dropped: {e.reason}",
    run.CoordinatorInboxMessage: lambda e: f"from {e.sender}: {e.content}",
    run.AgentInboxDrain: lambda e: f"{e.message_id} from {e.sender}",
    run.CoordinatorMessage: lambda e: f"→ {e.to}: {e.text}",
    run.CoordinatorNarration: lambda e: e.text,
    run.CoordinatorSynthesis: lambda e: e.summary,
    tool.ToolCall: _tool_call,
    run.AgentTurn: _agent_turn,
    run.StepEnd: lambda e: e.output,
    run.Error: lambda e: e.error,
    run.StepReused: lambda e: f"reused from run #{e.from_run} ({e.from_step}): {e.output}",
    run.StepSkipped: lambda e: f"{e.status or 'skipped'}: {e.reason}",
    run.WorkflowStart: lambda e: f"{e.workflow} v{e.version}",
    run.WorkflowEnd: lambda e: e.status,
    run.AgentWake: lambda e: f"cycle {e.cycle}: {e.reason}",
    run.MaxWakeCyclesWarning: lambda e: f"wake cycle {e.cycle} of at most {e.max}",
    run.StepCancelled: lambda e: f"cancelled by {e.message_id}: {e.reason}",
    run.StepRetry: lambda e: f"attempt {e.attempt}, the one before failed: {e.error}",
    run.ResumeStarted: lambda e: f"resume {e.resume} for {e.message_id}",
    run.ResumeQueued: lambda e: f"{e.message_id} from {e.sender} joins resume {e.resume}",
    run.TranscriptSealed: lambda e: f"{e.reason}: {e.error}",
    run.Message: lambda e: e.text,
    run.ResumeCompleted: lambda e: e.reply,
    run.ResumeFailed: lambda e: e.error,
    run.LoopIteration: lambda e: f"iteration {e.iteration}: {', '.join(e.steps)}",
    run.LoopJudge: lambda e: f"asking {e.agent} about iteration {e.iteration}",
    run.LoopJudged: lambda e: f"iteration {e.iteration} {'done' if e.done else 'not done'}: {e.answer}",
    run.LoopEnd: lambda e: f"{e.status}: {e.reason}",
    run.ProviderRetry: _provider_retry,
    run.CatalogCompacted: lambda e: (
        f"catalog sent compact: {e.full_tokens} tokens in full, {e.compact_tokens} compact, budget {e.budget_tokens}"
    ),
    tool.ToolStarted: lambda e: f"{e.name} attempt {e.attempt} on {e.worker}",
    tool.ToolResult: _tool_result,
    tool.ClaimRecorded: lambda e: f"{e.claim} ({e.url or 'no url'})",
    tool.ApprovalRequested: lambda e: f"{e.what}: {e.why}",
    tool.ApprovalDecided: lambda e: f"{e.decision} by {e.by}: {e.reason}",
    tool.ApprovalLapsed: lambda e: e.reason,
    tool.WaitingForInput: lambda e: f"asks: {e.question}" + (f" ({' / '.join(e.options)})" if e.options else ""),
    tool.InputReceived: lambda e: f"{e.by} answered: {e.answer}",
    tool.WorkflowCreated: lambda e: f"registered workflow {e.workflow} v{e.version}",
    tool.ToolCreated: lambda e: (
        f"proposed tool {e.name}: its example exited {e.example_exit_code}; waits for approval {e.approval_id}"
    ),
    tool.ToolRegistered: lambda e: f"tool {e.name}: {e.status}",
    tool.NotificationFailed: lambda e: f"the {e.channel} to approvers failed after {e.attempts} attempt(s): {e.error}",
    run.RunStuck: lambda e: e.reason,
    run.RunResumed: lambda e: e.reason,
    run.LeaseExpired: lambda e: f"{e.name or f'turn {e.turn}'}: the lease of {e.owner} ran out",
    run.CoordinatorOverBudget: _over_budget,
}


def read_row(event: Any) -> EventData | EventDataError:
    """The model of ``event`` (a stored row: ``type`` and ``data``), or the
    error saying why its data does not fit its type's model."""
    try:
        return parse(event.type, event.data or {})
    except EventDataError as exc:
        return exc


def summary_of(payload: EventData | EventDataError) -> str:
    """One line saying what an event read with ``read_row`` means. A row
    whose data does not fit its type's model says so, rather than breaking
    the page it is on."""
    if isinstance(payload, EventDataError):
        return _short(str(payload))
    says = SAYS.get(type(payload))
    return _short(says(payload)) if says else ""


def event_summary(event: Any) -> str:
    """One line saying what ``event`` (a stored row) means."""
    return summary_of(read_row(event))
