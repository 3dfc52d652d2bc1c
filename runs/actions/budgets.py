"""Run budgets (options.budget): tokens, tool calls and wall time, and the
run's timeout (options.timeout). A run past any of them ends failed with the
limit named. Time a run spent waiting for a person's approval or answer is
not wall time it spent, but it counts against its timeout; time a step
spent waiting for an answer does not count against its stepTimeout.

Also the run's token totals by role (``token_totals``): the coordinator, the
workflow's own steps, and the workers the coordinator spawned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Q, Sum
from django.utils import timezone

from agents.core.questions import waited_seconds
from agents.spec import WorkflowOptions
from runs.actions.catalog import workflow_spec
from runs.models import Approval, Run, Step

Role = Literal["coordinator", "steps", "workers"]
ROLES: tuple[Role, ...] = ("coordinator", "steps", "workers")


@dataclass
class Tokens:
    prompt: int = 0
    completion: int = 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def as_data(self) -> dict[str, int]:
        return {"prompt": self.prompt, "completion": self.completion, "total": self.total}


@dataclass
class TokenTotals:
    """A run's tokens, in all and by role. ``coordination_overhead`` is the
    coordinator's share of the total in percent."""

    coordinator: Tokens = field(default_factory=Tokens)
    steps: Tokens = field(default_factory=Tokens)
    workers: Tokens = field(default_factory=Tokens)

    @property
    def all(self) -> Tokens:
        return Tokens(
            sum(getattr(self, role).prompt for role in ROLES), sum(getattr(self, role).completion for role in ROLES)
        )

    @property
    def coordination_overhead(self) -> float | None:
        total = self.all.total
        return round(100 * self.coordinator.total / total, 1) if total else None

    def as_data(self) -> dict[str, Any]:
        return {
            "total": self.all.as_data(),
            **{role: getattr(self, role).as_data() for role in ROLES},
            "coordination_overhead_percent": self.coordination_overhead,
        }


def role_of(step: Step) -> Role:
    """Whose tokens a step row's are: loops count with the steps (their judge)."""
    if step.kind == Step.Kind.COORDINATOR:
        return "coordinator"
    return "workers" if step.spawned_by else "steps"


def totals_of(steps: Iterable[Step]) -> TokenTotals:
    """Token totals of step rows already loaded (no query)."""
    totals = TokenTotals()
    for step in steps:
        tokens = getattr(totals, role_of(step))
        tokens.prompt += step.prompt_tokens
        tokens.completion += step.completion_tokens
    return totals


_ROLE_FILTERS: dict[Role, Q] = {
    "coordinator": Q(kind=Step.Kind.COORDINATOR),
    "steps": ~Q(kind=Step.Kind.COORDINATOR) & Q(spawned_by=""),
    "workers": ~Q(kind=Step.Kind.COORDINATOR) & ~Q(spawned_by=""),
}


def token_totals(run: Run) -> TokenTotals:
    """The run's token totals by role, in one query."""
    return totals_from(run.steps.aggregate(**TOKEN_SUMS))


# Aggregates over a run's steps: its tokens by role and part, for totals_from.
TOKEN_SUMS = {
    f"{role}_{part}": Sum(f"{part}_tokens", filter=where, default=0)
    for role, where in _ROLE_FILTERS.items()
    for part in ("prompt", "completion")
}


def totals_from(sums: dict[str, int]) -> TokenTotals:
    """TokenTotals from an aggregate that included TOKEN_SUMS."""
    return TokenTotals(**{role: Tokens(sums[f"{role}_prompt"], sums[f"{role}_completion"]) for role in ROLES})


def has_run_limits(options: WorkflowOptions) -> bool:
    """Whether a run of a workflow with ``options`` has a budget or a timeout to enforce."""
    budget = options.budget
    return not (
        budget.tokens is None and budget.tool_calls is None and budget.wall_time is None and options.timeout is None
    )


def timeout_breach(run: Run, options: WorkflowOptions) -> str | None:
    """Why ``run`` is past options.timeout, or None (no query).

    The timeout is a deadline, like Temporal's workflow execution timeout:
    every second since the run started counts, approval waits included. That
    is what sets it apart from budget.wallTime, which leaves them out; with
    it, a run that waits for a person who never answers still ends."""
    if options.timeout is None or run.started is None:
        return None
    ran = ((run.finished or timezone.now()) - run.started).total_seconds()
    if ran < options.timeout:
        return None
    return f"run timed out: ran {ran:.1f}s, options.timeout is {options.timeout:g}s"


def run_deadline(run: Run, options: WorkflowOptions) -> float | None:
    """The Unix time options.timeout ends ``run``, or None."""
    if options.timeout is None or run.started is None:
        return None
    return run.started.timestamp() + options.timeout


def budget_breach(run: Run) -> str | None:
    """Why ``run`` is over its budget or past its timeout, or None."""
    options = workflow_spec(run.workflow).options
    timed_out = timeout_breach(run, options)
    if timed_out:
        return timed_out
    budget = options.budget
    if budget.tokens is not None:
        tokens = token_totals(run).all.total
        if tokens > budget.tokens:
            return f"budget exceeded: {tokens:,} tokens used, the budget is {budget.tokens:,} (options.budget.tokens)"
    if budget.tool_calls is not None:
        calls = run.tool_calls.filter(counted=True).count()
        if calls > budget.tool_calls:
            return (
                f"budget exceeded: {calls:,} tool calls made, the budget is {budget.tool_calls:,}"
                " (options.budget.toolCalls)"
            )
    if budget.wall_time is not None and run.started:
        spent = working_time(run)
        if spent.total_seconds() > budget.wall_time:
            return (
                f"budget exceeded: ran {spent.total_seconds():.1f}s, the budget is {budget.wall_time:g}s"
                " (options.budget.wallTime; approval waits excluded)"
            )
    return None


def working_time(run: Run) -> timedelta:
    """Time since the run started, less the time its approvals and
    questions were pending (two pending at once count once)."""
    if run.started is None:
        return timedelta()
    end = run.finished or timezone.now()
    waits = run.approvals.filter(created__gte=run.started).values_list("created", "decided_at")
    waited = waited_seconds(run.started.timestamp(), end.timestamp(), _spans(waits))
    return max(timedelta(), end - run.started - timedelta(seconds=waited))


def _spans(waits) -> list[tuple[float, float | None]]:
    return [(created.timestamp(), decided.timestamp() if decided else None) for created, decided in waits]


def step_waited(step: Step, now: datetime) -> float:
    """Seconds ``step`` (this attempt, since it started) spent waiting for
    answers to its questions (ask_person): they do not count against its
    options.stepTimeout."""
    if step.started is None:
        return 0.0
    waits = Approval.objects.filter(
        run_id=step.run_id, kind=Approval.Kind.QUESTION, step_id=step.step_id, created__gte=step.started
    ).values_list("created", "decided_at")
    return waited_seconds(step.started.timestamp(), now.timestamp(), _spans(waits))
