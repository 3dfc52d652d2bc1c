"""The payload models of the events of a run, its steps, agents' turns,
messages, loops and workers (the registry is agents/events/registry.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agents.events.base import GRAPH, EventData

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


class StepReused(EventData):
    """A forked run's step completed with its parent run's result (step
    ``from_step`` of run ``from_run``): no model or tool was called again."""

    type: Literal["step_reused"] = "step_reused"
    concerns = GRAPH
    from_run: int
    from_step: str
    output: str


class StepRetry(EventData):
    """A failed step runs again: ``attempt`` is the new attempt's number (2
    the first retry), ``error`` why the one before failed."""

    type: Literal["step_retry"] = "step_retry"
    concerns = GRAPH
    attempt: int
    error: str


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
    # How the model call went (agents.llm.CallFacts), where it was measured.
    model: str | None = None
    latency_ms: int | None = None
    retries: int | None = None
    finish_reason: str | None = None


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


class ResumeQueued(EventData):
    """A forward to a step being resumed joins the resume under way
    (zenflow's): ``message_id`` waits for resume ``resume``'s next turn."""

    type: Literal["resume_queued"] = "resume_queued"
    message_id: str
    sender: str
    resume: int


class TranscriptSealed(EventData):
    """A step's stored transcript is past the cap a resume reads
    (ZENWEB_MAX_TRANSCRIPT_BYTES): it is not resumed again (zenflow's
    ``transcript_sealed``, said once per step)."""

    type: Literal["transcript_sealed"] = "transcript_sealed"
    reason: str
    error: str


class Message(EventData):
    """A note of the run for the people reading it (zenflow's ``message``):
    what zenweb did that no other event says, ``reason`` its kind."""

    type: Literal["message"] = "message"
    text: str
    reason: str


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


PAYLOADS: tuple[type[EventData], ...] = (
    WorkflowStart,
    WorkflowEnd,
    StepStart,
    StepEnd,
    StepSkipped,
    StepReused,
    StepRetry,
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
    ResumeQueued,
    ResumeCompleted,
    ResumeFailed,
    TranscriptSealed,
    Message,
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
)
