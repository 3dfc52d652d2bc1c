"""Every body the API reads or writes, as pydantic models.

django-ninja parses requests and query strings with these models, so a bad
field is reported by name, and serializes the responses with them, so the
OpenAPI document it generates describes exactly what is sent.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agents.events import EVENT_TYPES
from agents.handler import CommandContext, CoordinatorResult, ResultStatus
from runs.actions.forks import MAX_FORK_INSTRUCTIONS
from runs.models import Approval, Run, ToolCall

MAX_COMMAND_CHARS = 4000
MAX_YAML_CHARS = 200_000
MAX_REASON_CHARS = 4000
SOURCE_PATTERN = r"^[A-Za-z0-9_.<>: -]*$"
EXAMPLE_WORKFLOW = """\
name: hello
description: Say hello.
agents:
  greeter:
    description: greeter agent
    script:
      - say: hello
steps:
  - id: greet
    agent: greeter
"""
DEFAULT_PAGE = 50
MAX_PAGE = 200
# The largest id a database row can have (a signed 64-bit integer): a larger
# one in a query is a 422, not a database error.
MAX_ID = 2**63 - 1
MAX_EVENTS = 500

# Built from the models' choices, so a new status is accepted without an edit
# here (a Literal made at run time, which mypy reads as the str it holds).
if TYPE_CHECKING:
    RunStatus = str
    ApprovalStatus = str
    ToolCallStatus = str
else:
    RunStatus = Literal[tuple(Run.Status.values)]
    ApprovalStatus = Literal[tuple(Approval.Status.values)]
    ToolCallStatus = Literal[tuple(ToolCall.Status.values)]
Mode = Literal["chat", "code"]
CommandStatus = ResultStatus
MAX_WAIT_SECONDS = 60


class _Request(BaseModel):
    # A misspelt field is an error, not silently ignored.
    model_config = ConfigDict(extra="forbid")


class _Query(BaseModel):
    # Query strings may carry things meant for others (cache busters, ...).
    model_config = ConfigDict(extra="ignore")


class _Response(BaseModel):
    pass


# Requests


class CommandRequest(_Request):
    """A command in plain words for the workflow handler."""

    command: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_COMMAND_CHARS)]
    mode: Mode = "chat"
    context: CommandContext | None = Field(
        default=None,
        description="What the Executor says with the command (stored on it, shown to the handler's model): "
        "`goal_focus`, `workflow_hint` (never overrides the command), `original_query` "
        "(the result's `workflow_args.original_query`).",
    )


class DecideRequest(_Request):
    """One person's decision on an approval. `arguments_hash` is the hash the
    caller reviewed: if the arguments changed since, the decision is refused."""

    decision: Literal["approve", "reject"]
    reason: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_REASON_CHARS)]
    # Left out or null: no hash given. An empty string is a mistake, not that.
    arguments_hash: Annotated[str, StringConstraints(min_length=1)] | None = None


class ForkRequest(_Request):
    """Where to fork a run that has ended, and what to change: the steps
    before `step` reuse the run's results; `step` and what follows run
    again, `step` with `instructions` when given, the run with `inputs`
    when given (else the run's)."""

    step: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    instructions: Annotated[str, StringConstraints(max_length=MAX_FORK_INSTRUCTIONS)] | None = None
    inputs: dict[str, Any] | None = None


class WorkflowRequest(_Request):
    """Workflow YAML to register as the next version of its name."""

    # A valid body for readers of the document, and for schemathesis (random YAML is never a workflow).
    model_config = ConfigDict(json_schema_extra={"examples": [{"yaml": EXAMPLE_WORKFLOW, "source": "hello.yaml"}]})

    yaml: Annotated[str, Field(min_length=1, max_length=MAX_YAML_CHARS)]
    # The parser stats a source to see whether it names a file (includes then
    # resolve next to it): a name too long for the filesystem was a 500. From
    # the API a source is a short name without folders.
    source: Annotated[
        str,
        Field(
            max_length=200,
            pattern=SOURCE_PATTERN,
            description="A name for the text in problems: letters, digits, space and `_.-<>:` (no folders).",
        ),
    ] = "<api>"


# Query strings


class FormatQuery(_Query):
    format: Literal["json", "markdown"] | None = None


class CommandQuery(FormatQuery):
    wait: int = Field(
        default=0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=f"Seconds (at most {MAX_WAIT_SECONDS}) to hold the answer while the command is `running`: "
        "it comes as soon as the status is final, or when they have passed.",
    )


class RunListQuery(_Query):
    status: RunStatus | None = None
    workflow: str | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE
    before: int | None = Field(default=None, ge=1, description="Only runs with a smaller id (the next page).")


class RunDetailQuery(_Query):
    after: int = Field(default=0, ge=0, description="Only events with a larger seq.")


class ApprovalListQuery(_Query):
    status: ApprovalStatus = "pending"
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE
    before: int | None = Field(
        default=None, ge=1, description="The last id of a page: only approvals listed after it (the next page)."
    )


# Responses


class Error(_Response):
    error: str


class FieldProblem(_Response):
    field: str
    message: str


class InvalidRequest(_Response):
    error: Literal["invalid request"] = "invalid request"
    problems: list[FieldProblem]


class WorkflowProblem(_Response):
    file: str
    line: int | None
    field: str
    message: str


class InvalidWorkflow(_Response):
    error: Literal["invalid workflow"] = "invalid workflow"
    problems: list[WorkflowProblem]


class RunLink(_Response):
    id: int
    status: str
    url: str


class CommandOut(_Response):
    id: int
    url: str = Field(description="This command in the API: GET it (with `?wait=N`) until `status` is final.")
    text: str
    mode: str
    status: CommandStatus = Field(
        description="`running` while its run is under way; every other status is the command's answer. "
        "`blocked` with `requires_approval` waits for a person's decision before the run starts."
    )
    created: datetime
    result: CoordinatorResult
    run: RunLink | None
    compact_catalog: bool = Field(
        description="The full catalog was past the handler's token budget and was sent in compact form."
    )


class RunSummary(_Response):
    id: int
    url: str
    workflow: str
    version: int
    status: str
    mode: str
    created_by: str | None
    created: datetime
    started: datetime | None
    finished: datetime | None
    error: str
    result: str
    stuck: str = Field(
        default="",
        description="Why a pending or running run is not moving (its start never taken, no progress); empty otherwise.",
    )
    forked_from: int | None = Field(default=None, description="The run this one was forked from, if it was.")
    fork_step: str = Field(default="", description="The step it was forked at (its first step not reused).")


class RunPage(_Response):
    runs: list[RunSummary]
    next: str | None = Field(description="The next (older) page, if there is one.")


class StepOut(_Response):
    step_id: str
    kind: str
    agent: str
    status: str
    turns: int
    prompt_tokens: int
    completion_tokens: int
    cost: str | None = Field(
        default=None,
        description="Its tokens' cost at the operator's prices (decimal); null: its model has no price.",
    )
    output: str
    error: str
    reused: bool = Field(default=False, description="A forked run's step whose result is its parent run's.")


class ModelCallOut(_Response):
    """One model call (a turn of a step or of the coordinator); null where it
    was not measured."""

    seq: int = Field(description="Its agent_turn event's seq.")
    step_id: str
    turn: int
    model: str | None
    latency_ms: int | None = Field(description="The call's latency, its retries included.")
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: str | None = Field(description="At the operator's prices (decimal); null: its model has no price.")
    retries: int | None
    finish_reason: str | None


class TokenCount(_Response):
    prompt: int
    completion: int
    total: int


class TokenTotals(_Response):
    """A run's tokens in all and by role: the coordinator, the workflow's own
    steps, and the workers the coordinator spawned."""

    total: TokenCount
    coordinator: TokenCount
    steps: TokenCount
    workers: TokenCount
    coordination_overhead_percent: float | None = Field(
        description="The coordinator's share of the total, in percent (null before any token was used)."
    )


class ClaimOut(_Response):
    id: int
    step_id: str
    claim: str
    confidence: float
    source_name: str
    source_domain: str
    url: str
    title: str
    source_type: str
    source_ref: str
    ttl: str
    expires_at: datetime | None


HIDDEN_CHARACTERS = (
    "True when what, why, arguments or actions hold a character a reader cannot see: a bidi override "
    "or isolate, a zero-width or other format character, a control character other than newline and tab "
    "(docs/security.md). `escaped` shows them as escapes (`\\u202e`)."
)


class ApprovalBrief(_Response):
    id: int
    status: str
    kind: str
    step_id: str
    what: str
    hidden_characters: bool = Field(description=HIDDEN_CHARACTERS)


class ToolCallOut(_Response):
    id: int
    step_id: str
    tool_call_id: str
    name: str
    status: ToolCallStatus = Field(
        description="queued -> running -> done | failed | timed_out | cancelled (a cancel of its run or step "
        "stopped it); waiting: for a child run or a person; blocked: a person rejected it."
    )
    ok: bool
    error_kind: str
    attempts: int = Field(description="How many times a worker took it (more than one: a worker died).")
    duration_ms: int
    started: datetime | None
    finished: datetime | None


class EventOut(_Response):
    seq: int
    # A str, not the registry's Literal: a type dropped from the registry
    # must not make an older run unreadable.
    type: str = Field(description=f"One of the event registry's types: {', '.join(EVENT_TYPES)}.")
    step_id: str
    data: dict[str, Any] = Field(
        description="The payload of its type's model in agents/events/registry.py "
        "(JSON Schema: /runs/export/events.schema.json)."
    )
    created: datetime


class RunDetail(RunSummary):
    inputs: dict[str, Any]
    command: str
    steps: list[StepOut]
    claims: list[ClaimOut]
    approvals: list[ApprovalBrief]
    tool_calls: list[ToolCallOut]
    tokens: TokenTotals
    cost: str | None = Field(description="The run's tokens' cost at the operator's prices (decimal); null: no price.")
    unpriced_models: list[str] = Field(description="The models whose tokens the run spent that have no price.")
    model_calls: list[ModelCallOut] = Field(description="Its last 500 model calls, oldest first.")
    coordinator_result: CoordinatorResult
    events: list[EventOut] = Field(description=f"Events after `after`, at most {MAX_EVENTS}.")
    next_after: int = Field(description="Pass as `after` to get the events that follow.")
    more: bool = Field(description="More events follow `next_after` already.")


class CancelOut(_Response):
    id: int
    status: str
    cancelled: bool
    error: str | None = Field(default=None, description="Why nothing was cancelled (with 409).")


class DecisionOut(_Response):
    user: str
    decision: str
    reason: str
    created: datetime


class ApprovalEscaped(_Response):
    """An approval's text as a person should read it: each hidden character
    written as its escape (``\\u202e``), so that it cannot reorder or hide
    what is shown."""

    what: str
    why: str
    arguments: dict[str, Any]
    actions: list[dict[str, Any]]


class ApprovalOut(_Response):
    id: int
    run: int
    workflow: str
    status: str
    kind: str
    step_id: str
    what: str
    why: str
    arguments: dict[str, Any]
    actions: list[dict[str, Any]] = Field(
        default_factory=list,
        description="A workflow's: the calls with effects its steps will make, as approved "
        "(agent, tool, arguments; `at_run_time` names what is filled in later, and such a call asks again).",
    )
    arguments_hash: str
    requested_by: str | None
    created: datetime
    expires_at: datetime | None
    decided_at: datetime | None
    reason: str
    required_approvals: int
    approvals: int = Field(description="How many people approved so far.")
    decisions: list[DecisionOut]
    hidden_characters: bool = Field(description=HIDDEN_CHARACTERS)
    escaped: ApprovalEscaped = Field(description="what, why, arguments and actions with hidden characters escaped.")


class ApprovalList(_Response):
    approvals: list[ApprovalOut]
    next: str | None = Field(description="The next page, if there is one.")


class WorkflowOut(_Response):
    name: str
    version: int
    created: bool = Field(description="False when the YAML equals the latest version, which is kept.")
