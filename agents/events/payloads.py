"""Every event type as a pydantic model of its ``data``, and the registry.

This module is the one list of event types: the runtime, the Django store,
the live page, the graph, the API and the export's JSON Schema read it.
A payload model lists exactly the keys an event's ``data`` holds (an
unknown key is refused), and ``concerns`` says which parts of a run's page
an event changes, so readers pick types by what they draw, not by name.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

# What on a run's page an event changes: "graph" the steps' states and the
# messages between them, "new_steps" the step list (steps added), "tool_calls"
# the tool-call table, "governance" approvals, claims and the run's result.
Concern = Literal["graph", "new_steps", "tool_calls", "governance"]

EventType = Literal[
    "workflow_start",
    "workflow_end",
    "step_start",
    "step_end",
    "step_skipped",
    "error",
    "agent_turn",
    "tool_call",
    "message_sent",
    "agent_inbox_drain",
    "coordinator_inbox_message",
    "coordinator_narration",
    "coordinator_message",
    "coordinator_synthesis",
    "message_dropped",
    "agent_idle",
    "agent_wake",
    "max_wake_cycles_warning",
    "resume_started",
    "resume_completed",
    "resume_failed",
    # zenweb's own, in the same style
    "step_cancelled",
    "loop_iteration",
    "loop_judge",
    "loop_judged",
    "loop_end",
    "worker_spawned",
    "child_run_linked",
    "child_run_result",
    "claim_recorded",
    "approval_requested",
    "approval_decided",
    "approval_lapsed",
    "tool_started",
    "tool_result",
    "run_resumed",
    "lease_expired",
    "run_stuck",
    "catalog_compacted",
    "coordinator_over_budget",
    "provider_retry",
]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)


class EventData(BaseModel):
    """The ``data`` of one event type. ``type`` is not stored in ``data``
    (the event row has its own column): it defaults to the type's name."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    concerns: ClassVar[frozenset[Concern]] = frozenset()


GRAPH: frozenset[Concern] = frozenset({"graph"})


# -- the run and its steps ---------------------------------------------------


class WorkflowStart(EventData):
    type: Literal["workflow_start"] = "workflow_start"
    concerns = GRAPH
    workflow: str
    version: int
    inputs: dict[str, Any]
    steps: list[str]
    # A child run started by a tool call of another run names it.
    parent_run_id: int | None = None
    parent_tool_call_id: str | None = None


class WorkflowEnd(EventData):
    type: Literal["workflow_end"] = "workflow_end"
    concerns = frozenset({"graph", "governance"})
    status: str
    result: str | None
    error: str


class StepStart(EventData):
    type: Literal["step_start"] = "step_start"
    concerns = GRAPH
    agent: str


class StepEnd(EventData):
    type: Literal["step_end"] = "step_end"
    concerns = GRAPH
    status: str
    output: str


class StepSkipped(EventData):
    type: Literal["step_skipped"] = "step_skipped"
    concerns = GRAPH
    reason: str
    status: str


class StepCancelled(EventData):
    type: Literal["step_cancelled"] = "step_cancelled"
    concerns = GRAPH
    message_id: str
    reason: str


class Error(EventData):
    """A step failed (``step_id`` set) or the run did (``step_id`` empty)."""

    type: Literal["error"] = "error"
    concerns = GRAPH
    error: str


class RunResumed(EventData):
    type: Literal["run_resumed"] = "run_resumed"
    reason: str
    steps: list[str]


class RunStuck(EventData):
    type: Literal["run_stuck"] = "run_stuck"
    reason: str


class LeaseExpired(EventData):
    """A step's lease (``turn`` set) or a tool call's (``tool_call_id`` set) ran out."""

    type: Literal["lease_expired"] = "lease_expired"
    concerns = frozenset({"tool_calls"})
    owner: str
    turn: int | None = None
    tool_call_id: str | None = None
    name: str | None = None


# -- agents' turns and the model ---------------------------------------------


class AgentTurn(EventData):
    type: Literal["agent_turn"] = "agent_turn"
    turn: int
    agent: str
    content: str
    tool_calls: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    # How many empty answers in a row, when this one was empty.
    empty_answer: int | None = None


class ProviderRetry(EventData):
    type: Literal["provider_retry"] = "provider_retry"
    # The HTTP status; None for a timeout or a connection error.
    status: int | None
    message: str
    attempt: int
    wait: float


class AgentIdle(EventData):
    type: Literal["agent_idle"] = "agent_idle"
    concerns = GRAPH
    cycle: int


class AgentWake(EventData):
    type: Literal["agent_wake"] = "agent_wake"
    concerns = GRAPH
    reason: str
    cycle: int
    messages: int


class MaxWakeCyclesWarning(EventData):
    type: Literal["max_wake_cycles_warning"] = "max_wake_cycles_warning"
    cycle: int
    max: int


class ResumeStarted(EventData):
    type: Literal["resume_started"] = "resume_started"
    message_id: str
    resume: int


class ResumeCompleted(EventData):
    type: Literal["resume_completed"] = "resume_completed"
    reply: str
    message_id: str


class ResumeFailed(EventData):
    type: Literal["resume_failed"] = "resume_failed"
    error: str


# -- messages ---------------------------------------------------------------


class MessageSent(EventData):
    type: Literal["message_sent"] = "message_sent"
    concerns = GRAPH
    message_id: str
    sender: str = Field(alias="from")
    to: str
    msg_type: str
    content: str


class MessageDropped(EventData):
    type: Literal["message_dropped"] = "message_dropped"
    concerns = GRAPH
    reason: str
    sender: str = Field(alias="from")
    to: str
    msg_type: str
    message_id: str


class AgentInboxDrain(EventData):
    type: Literal["agent_inbox_drain"] = "agent_inbox_drain"
    message_id: str
    sender: str = Field(alias="from")
    msg_type: str


class CoordinatorInboxMessage(EventData):
    type: Literal["coordinator_inbox_message"] = "coordinator_inbox_message"
    message_id: str
    sender: str = Field(alias="from")
    msg_type: str
    content: str


class CoordinatorNarration(EventData):
    type: Literal["coordinator_narration"] = "coordinator_narration"
    text: str


class CoordinatorMessage(EventData):
    type: Literal["coordinator_message"] = "coordinator_message"
    to: str
    message_id: str
    text: str


class CoordinatorSynthesis(EventData):
    type: Literal["coordinator_synthesis"] = "coordinator_synthesis"
    summary: str


class CoordinatorOverBudget(EventData):
    type: Literal["coordinator_over_budget"] = "coordinator_over_budget"
    reason: str
    cycle: int
    round: int
    prompt_tokens: int
    budget_tokens: int
    compacted: bool
    compact_tokens: int | None = None


class CatalogCompacted(EventData):
    type: Literal["catalog_compacted"] = "catalog_compacted"
    agent: str
    full_tokens: int
    compact_tokens: int
    budget_tokens: int
    over_budget: bool


# -- loops and workers --------------------------------------------------------


class LoopIteration(EventData):
    type: Literal["loop_iteration"] = "loop_iteration"
    concerns = frozenset({"graph", "new_steps"})
    iteration: int
    steps: list[str]


class LoopJudge(EventData):
    type: Literal["loop_judge"] = "loop_judge"
    iteration: int
    agent: str


class LoopJudged(EventData):
    type: Literal["loop_judged"] = "loop_judged"
    iteration: int
    done: bool
    answer: str


class LoopEnd(EventData):
    type: Literal["loop_end"] = "loop_end"
    concerns = GRAPH
    status: str
    reason: str


class WorkerSpawned(EventData):
    type: Literal["worker_spawned"] = "worker_spawned"
    concerns = frozenset({"graph", "new_steps"})
    agent: str
    task: str
    tools: list[str]
    depends_on: list[str]
    writes: list[str]
    tool_call_id: str


# -- tool calls ----------------------------------------------------------------


class Artifact(BaseModel):
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
    artifacts: list[Artifact] | None = None
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
    concerns = frozenset({"tool_calls"})
    run_id: int
    agent_id: str
    parent_run_id: int
    parent_tool_call_id: str


class ChildRunResult(EventData):
    type: Literal["child_run_result"] = "child_run_result"
    concerns = frozenset({"tool_calls"})
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


PAYLOADS: tuple[type[EventData], ...] = (
    WorkflowStart,
    WorkflowEnd,
    StepStart,
    StepEnd,
    StepSkipped,
    StepCancelled,
    Error,
    RunResumed,
    RunStuck,
    LeaseExpired,
    AgentTurn,
    ProviderRetry,
    AgentIdle,
    AgentWake,
    MaxWakeCyclesWarning,
    ResumeStarted,
    ResumeCompleted,
    ResumeFailed,
    MessageSent,
    MessageDropped,
    AgentInboxDrain,
    CoordinatorInboxMessage,
    CoordinatorNarration,
    CoordinatorMessage,
    CoordinatorSynthesis,
    CoordinatorOverBudget,
    CatalogCompacted,
    LoopIteration,
    LoopJudge,
    LoopJudged,
    LoopEnd,
    WorkerSpawned,
    ToolCall,
    ToolStarted,
    ToolResult,
    ChildRunLinked,
    ChildRunResult,
    ClaimRecorded,
    ApprovalRequested,
    ApprovalDecided,
    ApprovalLapsed,
)


def type_of(model: type[EventData]) -> str:
    """The event type ``model`` is the payload of (its ``type`` default)."""
    return model.model_fields["type"].default


# The registry: event type -> the model of its data.
REGISTRY: dict[str, type[EventData]] = {type_of(model): model for model in PAYLOADS}


def types_concerning(concern: Concern) -> frozenset[str]:
    """The event types that change ``concern`` on a run's page."""
    return frozenset(name for name, model in REGISTRY.items() if concern in model.concerns)
