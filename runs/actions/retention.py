"""Retention: deleting the runs that ended before a date, with everything
they hold (events, messages, steps, tool calls, artifacts, claims,
approvals) and their workspaces, a few at a time (`manage.py purge_runs`).

A run's events go first, a window of seqs per statement along the
(run, seq) index: a run of 50,000 events is deleted in bounded statements,
not loaded. Runs still under way are never touched, whenever they started;
a run that another run's tool call started keeps its place when that run
is deleted (its link to the call is emptied, as the foreign key says).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from agents import workspace_quota
from runs.actions.tooling import workspace_of
from runs.models import Event, Message, Run

# Runs deleted in one transaction, and events in one statement.
RUNS_AT_ONCE = 50
EVENTS_AT_ONCE = 10_000


@dataclass(frozen=True)
class Purged:
    runs: int
    events: int


def ended_before(cutoff: datetime):
    """The runs that ended (any end: completed, failed, cancelled, blocked...) before ``cutoff``."""
    return Run.objects.filter(status__in=Run.TERMINAL, finished__lt=cutoff)


def count_purgeable(cutoff: datetime) -> Purged:
    """What do_purge_runs would delete, counted."""
    runs = ended_before(cutoff)
    return Purged(runs.count(), Event.objects.filter(run__in=runs).count())


def do_purge_runs(cutoff: datetime) -> Purged:
    """Delete every run that ended before ``cutoff``, with what it holds and
    its workspace; what was deleted."""
    runs = events = 0
    while True:
        # A run's seqs are gapless up to its last_event_seq: no aggregate over its events.
        batch = list(ended_before(cutoff).order_by("pk").values_list("pk", "last_event_seq")[:RUNS_AT_ONCE])
        if not batch:
            return Purged(runs, events)
        for run_id, last_seq in batch:
            for start in range(0, last_seq, EVENTS_AT_ONCE):
                window = Event.objects.filter(run_id=run_id, seq__gt=start, seq__lte=start + EVENTS_AT_ONCE)
                events += window.delete()[0]
        ids = [run_id for run_id, _ in batch]
        with transaction.atomic():
            Message.objects.filter(run_id__in=ids).delete()
            Run.objects.filter(pk__in=ids).delete()
        for run_id in ids:
            # Its own file system unmounted and its image deleted first (agents/workspace_quota.py).
            workspace_quota.remove(workspace_of(run_id))
        runs += len(ids)
