"""What the runs' actions count for Prometheus (agents/metrics.py), once
their transaction commits: a rolled-back end counts nothing."""

from __future__ import annotations

import functools
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents import metrics
from runs.models import Run, Step


def _seconds_since(started: datetime | None) -> float | None:
    return (timezone.now() - started).total_seconds() if started else None


def run_started(workflow: str) -> None:
    transaction.on_commit(functools.partial(metrics.run_started, workflow))


def run_ended(run: Run) -> None:
    seconds = _seconds_since(run.started)
    transaction.on_commit(functools.partial(metrics.run_ended, run.workflow.name, run.status, seconds))


def step_ended(step: Step, status: str) -> None:
    transaction.on_commit(functools.partial(metrics.step_ended, status, _seconds_since(step.started)))
