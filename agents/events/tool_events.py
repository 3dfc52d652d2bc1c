"""The payload models of the events of tool calls, child runs, claims and
approvals (the registry is agents/events/registry.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from agents.events.base import EventData

# -- tool calls ----------------------------------------------------------------


class ArtifactRef(BaseModel):
    kind: str
    title: str


class ToolCall(EventData):
    """A call as the model made it: ``phase`` start (with its arguments)
    and end (with what it returned)."""

    type: Literal["tool_call"] = "tool_call"
    concerns = frozenset({"tool_calls"})
    phase: Literal["start", "end"]
    tool_call_id: str
    name: str
    arguments: str | None = None
    meta: dict[str, str | None] | None = None
    ok: bool | None = None
    result: str | None = None
    duration_ms: int | None = None
    error_kind: str | None = None
    bounds: dict[str, Any] | None = None
    omitted: bool | None = None
    artifacts: list[ArtifactRef] | None = None
    # A result that comes later: from a queue, a child run or an approval.
    pending: bool | None = None
    queued: bool | None = None
    child_run_id: str | None = None
    approval_id: str | None = None


class ToolStarted(EventData):
    type: Literal["tool_started"] = "tool_started"
    concerns = frozenset({"tool_calls"})
    tool_call_id: str
    name: str
    attempt: int
    worker: str


class ToolResult(EventData):
    """The late result of a queued or approved call."""

    type: Literal["tool_result"] = "tool_result"
    concerns = frozenset({"tool_calls"})
    tool_call_id: str
    result: str
    status: str
    name: str | None = None
    ok: bool | None = None
    duration_ms: int | None = None
    bounds: dict[str, Any] | None = None
    error_kind: str | None = None
    approval_id: int | None = None


class ChildRunLinked(EventData):
    type: Literal["child_run_linked"] = "child_run_linked"
    concerns = frozenset({"tool_calls", "graph"})
    run_id: int
    agent_id: str
    parent_run_id: int
    parent_tool_call_id: str


class ChildRunResult(EventData):
    type: Literal["child_run_result"] = "child_run_result"
    concerns = frozenset({"tool_calls", "graph"})
    tool_call_id: str
    run_id: int
    status: str
    result: str


# -- governance ------------------------------------------------------------------


class ClaimRecorded(EventData):
    type: Literal["claim_recorded"] = "claim_recorded"
    concerns = frozenset({"governance"})
    claim_id: int
    claim: str
    confidence: float
    url: str


class ApprovalRequested(EventData):
    type: Literal["approval_requested"] = "approval_requested"
    concerns = frozenset({"governance"})
    approval_id: int
    kind: str
    what: str
    why: str
    arguments: dict[str, Any]
    # What a destructive workflow will do, when it is known before it runs.
    actions: list[dict[str, Any]] | None = None


class ApprovalDecided(EventData):
    type: Literal["approval_decided"] = "approval_decided"
    concerns = frozenset({"governance"})
    approval_id: int
    by: str
    decision: str
    reason: str
    approvals: int
    required: int


class ApprovalLapsed(EventData):
    type: Literal["approval_lapsed"] = "approval_lapsed"
    concerns = frozenset({"governance"})
    approval_id: int
    reason: str


class WaitingForInput(EventData):
    """A step asked a person (ask_person): its call ``tool_call_id`` waits
    for the answer to question ``approval_id`` until ``expires_at``."""

    type: Literal["waiting_for_input"] = "waiting_for_input"
    concerns = frozenset({"governance", "tool_calls"})
    approval_id: int
    tool_call_id: str
    question: str
    options: list[str]
    expires_at: str | None = None


class InputReceived(EventData):
    """A person (``by``) answered question ``approval_id``."""

    type: Literal["input_received"] = "input_received"
    concerns = frozenset({"governance", "tool_calls"})
    approval_id: int
    tool_call_id: str
    by: str
    answer: str


class NotificationFailed(EventData):
    """An approval's email or webhook that could not be sent (the run goes on)."""

    type: Literal["notification_failed"] = "notification_failed"
    approval_id: int
    channel: Literal["email", "webhook"]
    error: str
    attempts: int


# -- the coordinator extends the system (agents/tools/builtin/extending.py) ----


class WorkflowCreated(EventData):
    """A workflow version the coordinator registered (create_workflow)."""

    type: Literal["workflow_created"] = "workflow_created"
    workflow: str
    version: int
    tool_call_id: str


class ToolCreated(EventData):
    """A tool the coordinator proposed (create_tool): its example ran, and
    it waits for a person's approval."""

    type: Literal["tool_created"] = "tool_created"
    concerns = frozenset({"governance"})
    name: str
    approval_id: int
    example_exit_code: int
    tool_call_id: str


class ToolRegistered(EventData):
    """A created tool's approval was decided: ``approved`` (later runs'
    agents that list it get it), ``rejected`` or ``lapsed``."""

    type: Literal["tool_registered"] = "tool_registered"
    concerns = frozenset({"governance"})
    name: str
    approval_id: int
    status: Literal["approved", "rejected", "lapsed"]


PAYLOADS: tuple[type[EventData], ...] = (
    ToolCall,
    ToolStarted,
    ToolResult,
    ChildRunLinked,
    ChildRunResult,
    ClaimRecorded,
    ApprovalRequested,
    ApprovalDecided,
    ApprovalLapsed,
    WaitingForInput,
    InputReceived,
    NotificationFailed,
    WorkflowCreated,
    ToolCreated,
    ToolRegistered,
)
