"""What a run has spent: its token totals by role (``token_totals``: the
coordinator, the workflow's own steps, and the workers the coordinator
spawned), its working time (``working_time``: what options.budget.wallTime
counts, the waits for a person's approval or answer left out), and a step's
time waiting for answers (``step_waited``: not counted against its step
timeout). The limits on them: deadlines.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Q, Sum
from django.utils import timezone

from agents.core.questions import waited_seconds
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
