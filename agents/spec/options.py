"""A workflow's run-wide options: limits, budget, sandbox, the coordinator's
policy, its exposure as a tool, and who approves destructive work."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from agents.spec.fields import (
    DEFAULT_EMPTY_ANSWER_RETRIES,
    DEFAULT_TOOL_TIMEOUT,
    MAX_DESCRIPTION,
    MAX_STEPS,
    MAX_TOOL_TIMEOUT,
    Name,
    OnStepFailure,
    Seconds,
    SpecModel,
)


class Budget(SpecModel):
    """What a whole run may spend; past any of these it ends failed, naming
    the budget. Time spent waiting for a person's approval does not count."""

    tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens, all agents")
    tool_calls: int | None = Field(default=None, ge=1, description="counted tool calls (not bookkeeping)")
    wall_time: Seconds | None = Field(default=None, gt=0, description="seconds from start, less approval waits")
    cost: float | None = Field(
        default=None, gt=0, description="money, all agents, at the operator's prices (ZENWEB_MODEL_PRICES)"
    )
    # Per invocation, not per run: a coordinator wake whose prompt is past this
    # is recorded (coordinator_over_budget), and its "finish" prompt is compacted.
    coordinator_tokens: int | None = Field(
        default=None, ge=1, description="prompt tokens one coordinator invocation may send"
    )


class SandboxOptions(SpecModel):
    """Limits of this workflow's tool processes (run_shell), each at most
    the operator's maximum (ZENWEB_SANDBOX_MAX_*): a larger value is lowered
    to it, and an unset one is the maximum. ``network`` is granted only where
    the operator allows it (ZENWEB_SANDBOX_ALLOW_NETWORK)."""

    processes: int | None = Field(default=None, ge=1, description="processes and threads at once")
    cpu_seconds: int | None = Field(default=None, ge=1, description="CPU seconds per call")
    memory_mb: int | None = Field(default=None, ge=16, description="address space per process, MiB")
    file_size_mb: int | None = Field(default=None, ge=1, description="largest file written, MiB")
    disk_mb: int | None = Field(default=None, ge=1, description="the workspace's size, MiB")
    network: bool = False


DEFAULT_MAX_CONCURRENCY = 5


class WorkflowOptions(SpecModel):
    """Run-wide limits. Timeouts are in seconds; None means no limit."""

    # 0, as zenflow writes it: the default.
    max_concurrency: int = Field(default=DEFAULT_MAX_CONCURRENCY, ge=0)
    max_turns: int = Field(default=50, ge=1, le=500)
    on_step_failure: OnStepFailure = "cascade"
    # zenflow's: tool-call retries inside a step, how steps are isolated and
    # scheduled (agents.spec.not_run says which values zenweb does not run).
    max_retries: int | None = Field(default=None, ge=0)
    isolation: str = ""
    scheduler: Literal["dependency-first", "round-robin", "least-busy"] = "dependency-first"
    # Deadlines, enforced by runs/ (a turn's checks and the sweeper): past one
    # the run, or the step, fails. Approval waits count, unlike budget.wallTime.
    timeout: Seconds | None = Field(default=None, gt=0, description="seconds from the run's start")
    step_timeout: Seconds | None = Field(default=None, gt=0, description="seconds from each step's start")
    # Messaging caps; None takes zenweb's setting (see README, "Messages and drops").
    max_mailbox_size: int | None = Field(default=None, ge=0)  # 0 = unbounded
    max_wake_cycles: int | None = Field(default=None, ge=1)  # the coordinator's
    step_max_wake_cycles: int | None = Field(default=None, ge=0)
    hold_timeout: Seconds | None = Field(default=None, ge=0)  # 0 = no limit
    # The run policy: tool calls a step may make, in a row that may fail,
    # and tool calls the whole run may make. Past a cap the step fails.
    max_tool_calls: int = Field(default=200, ge=1)
    max_consecutive_tool_failures: int = Field(default=5, ge=1)
    max_run_tool_calls: int = Field(default=2000, ge=1)
    # An answer with no text and no tool call is answered with a hint this
    # many times in a row; the next one fails the step (or, the coordinator's,
    # the run) with "empty answer from the model".
    max_empty_answer_retries: int = Field(default=DEFAULT_EMPTY_ANSWER_RETRIES, ge=0, le=10)
    budget: Budget = Field(default_factory=Budget)

    @field_validator("max_concurrency", mode="after")
    @classmethod
    def _zero_is_the_default(cls, value: int) -> int:
        return value or DEFAULT_MAX_CONCURRENCY

    # Workers the coordinator may add with spawn_worker, and the agent they
    # run as when spawn_worker names none.
    max_workers: int = Field(default=8, ge=0, le=MAX_STEPS)
    worker_agent: str = "worker"
    # How service-backed tool calls run: ``tasks`` (each its own durable
    # Celery task; the step's worker is freed while they run) or ``inline``
    # (in the step's turn, one after another).
    tool_execution: Literal["tasks", "inline"] = "tasks"
    # The longest one tool call may take (seconds), and per-tool overrides.
    tool_timeout: Seconds = Field(default=DEFAULT_TOOL_TIMEOUT, gt=0, le=MAX_TOOL_TIMEOUT)
    tool_timeouts: dict[str, Annotated[Seconds, Field(gt=0, le=MAX_TOOL_TIMEOUT)]] = Field(default_factory=dict)
    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)


class CoordinatorPolicy(SpecModel):
    """What the run's coordinator must do. ``requireWorkers``: it plans the
    work with spawn_worker, and a finalize before any worker was spawned is
    refused with a hint (the model gets another turn)."""

    require_workers: bool = False


class ToolExposure(SpecModel):
    """Offer this workflow to other workflows' agents as a tool (agent-as-tool):
    calling it starts a child run whose result is the tool's result. The
    tool's arguments are the workflow's inputs."""

    name: Name
    description: str = Field(default="", max_length=MAX_DESCRIPTION)


class ApprovalPolicy(SpecModel):
    """Who must approve destructive work, and for how long a request stands.
    With ``approvers: 2`` two different people must approve, and nobody
    approves their own request."""

    approvers: int = Field(default=1, ge=1, le=2)
    expires_after: Seconds | None = Field(default=None, gt=0, description="seconds until a pending request lapses")
