"""Waking the coordinator, and stopping a waiting step, after commit."""

from __future__ import annotations

import threading

from django.db import transaction

from runs import queue
from runs.models import Run
from runs.store import sql


def request_coordinator_wake(run_id: int) -> None:
    """Count a reason for the coordinator to wake, and wake it after commit
    unless a wake runs or is queued."""
    wake_after_commit(run_id, busy=sql.request_wake(run_id))


# Runs this thread's transaction asked to wake, and whether one needs a
# task. Like the broadcasts: each request adds a callback, the first after
# commit sends the task, the others find nothing to do. An entry a rollback
# left behind at worst sends one wake too many, which finds nothing to do.
_wakes = threading.local()


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
    reads this message too; a queued one reads it when it starts."""
    pending: dict[int, bool] = _wakes.__dict__.setdefault("runs", {})
    pending[run_id] = pending.get(run_id, False) or not busy

    def wake() -> None:
        if pending.pop(run_id, False):
            try:
                queue.send(queue.WAKE_COORDINATOR, run_id)
            except Exception:
                # Not queued after all: let the next request queue one.
                Run.objects.filter(pk=run_id).update(wake_queued=None)
                raise

    transaction.on_commit(wake, robust=True)
