"""Retention: deleting the runs that ended before a date, with everything
they hold (events, messages, steps, tool calls, artifacts, claims,
approvals) and their workspaces, a few at a time (`manage.py purge_runs`);
and, sooner, the file systems of ended runs' workspaces unmounted
(``release_ended_workspaces``, each sweep): a host keeps mounted only the
workspaces of runs under way.

A run's events go first, a window of seqs per statement along the
(run, seq) index: a run of 50,000 events is deleted in bounded statements,
not loaded. Runs still under way are never touched, whenever they started;
a run that another run's tool call started keeps its place when that run
is deleted (its link to the call is emptied, as the foreign key says).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction

from agents import workspace_quota
from runs.actions.tool_host import workspace_of
from runs.models import Event, Run
from runs.store.sql import store

# Runs deleted in one transaction, and events in one statement.
RUNS_AT_ONCE = 50
EVENTS_AT_ONCE = 10_000
# How long an ended run keeps its workspace mounted: its tool calls stopped
# long before (within a lease period), and whoever looks at its files or
# resumes it right after its end finds them where they were.
RELEASE_AFTER = timedelta(minutes=5)


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
                events += store().delete_events(run_id, start, start + EVENTS_AT_ONCE)
        ids = [run_id for run_id, _ in batch]
        with transaction.atomic():
            store().delete_runs(ids)
        for run_id in ids:
            # Its own file system unmounted and its image deleted first (agents/workspace_quota.py).
            workspace_quota.remove(workspace_of(run_id))
        runs += len(ids)


def release_ended_workspaces(now: datetime) -> int:
    """Unmount the workspace file systems this host holds for runs that
    ended RELEASE_AFTER before ``now`` (one whose file a process still holds
    keeps it until a later sweep); how many. Their images stay: a tool of a
    resumed run mounts its workspace again. Without this, every run that
    ever wrote a file would keep a mount and a loop device until purge_runs,
    and every sandbox would copy them all into its mount namespace."""
    mounted = {}
    for root in workspace_quota.mounted_in(Path(settings.ZENWEB_WORKSPACES)):
        prefix, _, number = root.name.partition("-")
        if prefix == "run" and number.isdigit():
            mounted[int(number)] = root
    if not mounted:
        return 0
    ended = ended_before(now - RELEASE_AFTER).filter(pk__in=list(mounted)).values_list("pk", flat=True)
    return sum(workspace_quota.release(mounted[run_id]) for run_id in ended)
