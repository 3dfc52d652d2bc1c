"""Celery tasks: thin wrappers that pass ids to runs/actions/.

The top of the core with the sweeper: they call the actions, which queue
these tasks by name (runs/queue.py) and never import this module.

Each task is safe to run twice: the actions claim their work with a
conditional UPDATE, so a redelivered task finds nothing left to do.

A lost or refused database connection (a failover, a PgBouncer restart, an
idle reaper, a SQLite lock: runs/store/sql/errors.py) is not the work's fault: the
task closes its connection and is retried with backoff (``retry_after``),
and only other errors fail a step, a run or a call.
"""

from __future__ import annotations

import logging
import random
import time

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from runs import actions, leases, queue
from runs.actions.approvals import do_execute_approved_call
from runs.actions.children import do_deliver_child_result
from runs.actions.coordinator import release_wake
from runs.actions.notifications import WebhookFailed, do_email_approvers, do_post_webhook, record_webhook_failure
from runs.actions.notifications import retry_delay as webhook_retry_delay
from runs.actions.step_ends import do_end_iteration, do_judge_loop, do_next_iteration, do_stop_waiting_step
from runs.actions.tool_tasks import do_execute_tool_call, do_fail_tool_call, release_call
from runs.store.sql.errors import connection_lost

log = logging.getLogger(__name__)

CONNECTION_ERRORS = (OperationalError, InterfaceError)
# Retried for about a quarter of an hour (the delay doubles up to MAX_RETRY_DELAY);
# past that the sweeper's recovery (runs/sweeper.py) takes over.
MAX_RETRIES = 40
FIRST_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 30.0
RETRYING = {"bind": True, "max_retries": MAX_RETRIES}


def retry_after(task: Task, exc: Exception, **kwargs) -> None:
    """Retry ``task`` (with ``kwargs`` added to its own) after a connection
    error: close the broken connection, wait longer each time. Raises."""
    _close_connection()
    retries = task.request.retries
    delay = min(MAX_RETRY_DELAY, FIRST_RETRY_DELAY * 2**retries) * random.uniform(0.8, 1.2)
    log.warning(
        "%s%s: database connection lost (%s); retry %d in %.1fs", task.name, task.request.args, exc, retries + 1, delay
    )
    raise task.retry(exc=exc, countdown=delay, kwargs={**task.request.kwargs, **kwargs})


@shared_task(**RETRYING)
def start_run(self: Task, run_id: int) -> None:
    try:
        follow = actions.do_start_run(run_id, leases.worker_identity())
    except Exception as exc:
        if connection_lost(exc):
            retry_after(self, exc)
        log.exception("starting run %s failed", run_id, extra={"run_id": run_id})
        actions.do_fail_run(run_id, f"could not start: {type(exc).__name__}: {exc}")
    else:
        _continue_eagerly(follow)


def _holders(release: list[str]) -> list[str]:
    """The lease holders a retry hands back: the earlier attempts' (a hand-back
    the lost connection stopped too) and this one's."""
    return sorted({*release, leases.worker_identity()})


@shared_task(**RETRYING)
def run_step_turn(self: Task, step_pk: int, turn: int, release: list[str] | None = None) -> None:
    try:
        for owner in release or ():
            # An attempt a connection error stopped held the turn's lease: it gave it up.
            leases.release(step_pk, owner)
        follow = actions.do_step_turn(step_pk, turn)
        if release and follow is None:
            # An earlier attempt lost its connection, perhaps after its turn
            # committed, in what follows it (a successor's start, the
            # coordinator's wake): decided again here, nothing happens twice.
            actions.do_schedule_run_of(step_pk)
    except Exception as exc:
        if connection_lost(exc):
            retry_after(self, exc, release=_holders(release or []))
        # A bug or a broken tool must not leave the run waiting forever.
        log.exception("turn %s of step %s failed", turn, step_pk)
        actions.do_fail_step(step_pk, f"internal error: {type(exc).__name__}: {exc}")
        return
    _continue_eagerly(follow)


# How long one take_queued_turns task goes on taking turns before it hands
# the rest to a task of its own: a warm shutdown (a deploy) waits for the
# turn a worker is taking, not for every turn a wide fan-out has left, and
# other runs' tasks are not held behind one run for longer.
TAKE_TURNS_FOR = 1.0


@shared_task(**RETRYING)
def take_queued_turns(self: Task, run_id: int) -> None:
    """Take the first turns of run ``run_id`` that wait queued (a fan-out's:
    scheduling._start_steps), one after another, each with what follows it
    (_continue_eagerly), until none waits. At its first, if another waits,
    it asks for one more worker (another of these tasks): workers join as
    long as they are free, and a fan-out pays the broker a task per worker
    that joins, not one per step. A task that joins once none waits does
    nothing. Past TAKE_TURNS_FOR seconds it takes one more turn and leaves
    the others to a task it queues."""
    owner = leases.worker_identity()
    until = time.monotonic() + TAKE_TURNS_FOR
    asked, last = False, 0
    while True:
        try:
            follow, more = actions.take_queued_turn(run_id, owner, last)
        except Exception as exc:
            if connection_lost(exc):
                retry_after(self, exc)
            raise
        if follow is None:
            return
        handing_on = time.monotonic() > until
        if more and (handing_on or not asked):
            # One more worker at the first turn; at the last, the task that goes on.
            queue.send(queue.TAKE_QUEUED_TURNS, run_id)
            asked = True
        last = follow.step_pk
        _continue_eagerly(follow)
        if handing_on:
            return


def _continue_eagerly(follow: actions.Eager | None) -> None:
    """Do here, instead of through the broker, what a completion or a run's
    start left to this worker: the first turn of the step it started (and
    what that turn's completion starts, and so on), or the coordinator's
    wake: a chain pays no broker hop per step. A lost connection hands the
    work to a task of its own, as a retry would."""
    while follow is not None:
        if isinstance(follow, actions.EagerWake):
            _wake_here(follow.run_id)
            return
        step_pk = follow.step_pk
        try:
            follow = actions.do_eager_turn(follow)
        except Exception as exc:
            if connection_lost(exc):
                what = f"step {step_pk}'s first turn"
                _hand_to_task(run_step_turn, (step_pk, 1), {"release": _holders([])}, what, exc)
                return
            log.exception("turn 1 of step %s failed", step_pk)
            actions.do_fail_step(step_pk, f"internal error: {type(exc).__name__}: {exc}")
            return


def _wake_here(run_id: int) -> None:
    """The coordinator's wake, as the wake_coordinator task runs it."""
    try:
        actions.do_coordinator_wake(run_id)
    except Exception as exc:
        if not connection_lost(exc):
            raise
        _hand_to_task(wake_coordinator, (run_id,), {"release": True}, f"run {run_id}'s coordinator wake", exc)


def _hand_to_task(task: Task, args: tuple, kwargs: dict, what: str, exc: Exception) -> None:
    """Work done eagerly that lost its database connection goes to a task of
    its own, as a retry of its task would (``kwargs`` say what to release)."""
    log.warning("%s: database connection lost (%s); it goes to a task", what, exc)
    _close_connection()
    task.apply_async(args, kwargs, countdown=FIRST_RETRY_DELAY)


def _close_connection() -> None:
    try:
        connection.close()
    except CONNECTION_ERRORS:
        pass  # it is gone either way


@shared_task
def stop_waiting_step(run_id: int, step_id: str) -> None:
    do_stop_waiting_step(run_id, step_id)


@shared_task(**RETRYING)
def wake_coordinator(self: Task, run_id: int, release: bool = False) -> None:
    try:
        if release:
            # The wake a connection error stopped left the coordinator busy.
            release_wake(run_id)
        actions.do_coordinator_wake(run_id)
    except Exception as exc:
        if not connection_lost(exc):
            raise
        retry_after(self, exc, release=True)


@shared_task(**RETRYING)
def resume_step(self: Task, step_pk: int) -> None:
    try:
        actions.do_resume_turn(step_pk)
    except Exception as exc:
        if connection_lost(exc):
            retry_after(self, exc)
        log.exception("resuming step %s failed", step_pk)
        actions.do_fail_resume(step_pk, f"internal error: {type(exc).__name__}: {exc}")


@shared_task
def judge_loop(loop_pk: int, iteration: int) -> None:
    do_judge_loop(loop_pk, iteration)


@shared_task
def next_iteration(loop_pk: int, iteration: int) -> None:
    do_next_iteration(loop_pk, iteration)


@shared_task
def end_iteration(run_id: int, step_id: str) -> None:
    do_end_iteration(run_id, step_id)


@shared_task
def deliver_child_result(child_run_id: int) -> None:
    do_deliver_child_result(child_run_id)


@shared_task
def execute_approved_call(approval_id: int) -> None:
    do_execute_approved_call(approval_id)


@shared_task
def email_approvers(approval_id: int) -> None:
    do_email_approvers(approval_id)


# The webhook task counts its own tries (ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS): no Celery limit.
@shared_task(bind=True, max_retries=None)
def post_approval_webhook(self: Task, approval_id: int) -> None:
    """POST the approval's webhook; retry with backoff while the receiver
    fails, then record the failure on the run (which goes on either way)."""
    attempt = self.request.retries + 1
    try:
        do_post_webhook(approval_id)
    except WebhookFailed as exc:
        if attempt >= settings.ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS:
            record_webhook_failure(approval_id, str(exc), attempt)
            return
        delay = webhook_retry_delay(attempt)
        log.warning("approval %d: webhook try %d failed (%s); next in %.1fs", approval_id, attempt, exc, delay)
        raise self.retry(countdown=delay) from None


@shared_task(**RETRYING)
def execute_tool_call(self: Task, call_pk: int, release: list[str] | None = None) -> None:
    try:
        for owner in release or ():
            # An attempt a connection error stopped held the call: queued again, it runs
            # here (or its journaled result is delivered, if the tool had finished).
            release_call(call_pk, owner)
        do_execute_tool_call(call_pk)
    except Exception as exc:
        if connection_lost(exc):
            retry_after(self, exc, release=_holders(release or []))
        # A bug must not leave the step waiting for this call forever.
        log.exception("tool call %s failed", call_pk)
        do_fail_tool_call(call_pk, f"internal error: {type(exc).__name__}: {exc}")
