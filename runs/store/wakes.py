"""Waking the coordinator, and stopping a waiting step, after commit."""

from __future__ import annotations

from django.db import transaction

from runs import queue
from runs.models import Run
from runs.store.sql import store


def request_coordinator_wake(run_id: int) -> None:
    """Count a reason for the coordinator to wake, and wake it after commit
    unless a wake runs or is queued."""
    wake_after_commit(run_id, busy=store().request_wake(run_id))


def stop_waiting_after_commit(run_id: int, step_id: str) -> None:
    """A step waiting for a call's result takes no turn until it comes, so
    its turn would not read this cancel: stop it now if it waits (see
    actions.step_ends.do_stop_waiting_step)."""
    queue.send_after_commit(queue.STOP_WAITING_STEP, run_id, step_id)


def wake_after_commit(run_id: int, *, busy: bool) -> None:
    """Wake the coordinator after commit, unless a wake is running or queued
    (``busy``): a running wake read wake_requests before reading its inbox
    and goes idle only if the count is unchanged, which this transaction's
    bump (holding the run row's lock until commit) sees to, so it loops and
    reads this message too; a queued one reads it when it starts.

    Once per transaction: its first request marks the wake queued
    (runs/store/sql/runs.py wake_sql), and the ones after it, seeing the
    mark, are ``busy``. A request in a savepoint that rolls back takes its
    mark and its callback with it, and the next request queues the wake."""
    if busy:
        return

    def wake() -> None:
        try:
            queue.send(queue.WAKE_COORDINATOR, run_id)
        except Exception:
            # Not queued after all: let the next request queue one.
            Run.objects.filter(pk=run_id).update(wake_queued=None)
            raise

    transaction.on_commit(wake, robust=True)
