"""Celery tasks: thin wrappers that pass ids to runs/actions.py.

Each task is safe to run twice: the actions claim their work with a
conditional UPDATE, so a redelivered task finds nothing left to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from celery import Task, shared_task
from django.db import transaction

from runs import actions

log = logging.getLogger(__name__)


@shared_task
def start_run(run_id: int) -> None:
    try:
        actions.do_start_run(run_id)
    except Exception as exc:
        log.exception("starting run %s failed", run_id)
        actions.do_fail_run(run_id, f"could not start: {type(exc).__name__}: {exc}")


@shared_task
def run_step_turn(step_pk: int, turn: int) -> None:
    try:
        actions.do_step_turn(step_pk, turn)
    except Exception as exc:
        # A bug or a broken tool must not leave the run waiting forever.
        log.exception("turn %s of step %s failed", turn, step_pk)
        actions.do_fail_step(step_pk, f"internal error: {type(exc).__name__}: {exc}")


@shared_task
def stop_waiting_step(run_id: int, step_id: str) -> None:
    from runs.actions.steps import do_stop_waiting_step

    do_stop_waiting_step(run_id, step_id)


@shared_task
def wake_coordinator(run_id: int) -> None:
    actions.do_coordinator_wake(run_id)


@shared_task
def resume_step(step_pk: int) -> None:
    try:
        actions.do_resume_turn(step_pk)
    except Exception as exc:
        log.exception("resuming step %s failed", step_pk)
        actions.do_fail_resume(step_pk, f"internal error: {type(exc).__name__}: {exc}")


@shared_task
def judge_loop(loop_pk: int, iteration: int) -> None:
    from runs.actions.containers import do_judge_loop

    do_judge_loop(loop_pk, iteration)


@shared_task
def deliver_child_result(child_run_id: int) -> None:
    from runs.actions.children import do_deliver_child_result

    do_deliver_child_result(child_run_id)


@shared_task
def execute_approved_call(approval_id: int) -> None:
    from runs.actions.approvals import do_execute_approved_call

    do_execute_approved_call(approval_id)


@shared_task
def execute_tool_call(call_pk: int) -> None:
    from runs.actions.tool_tasks import do_execute_tool_call, do_fail_tool_call

    try:
        do_execute_tool_call(call_pk)
    except Exception as exc:
        # A bug must not leave the step waiting for this call forever.
        log.exception("tool call %s failed", call_pk)
        do_fail_tool_call(call_pk, f"internal error: {type(exc).__name__}: {exc}")


# Messages a batch publishes per round trip to Redis. Workers take the first
# ones while the rest are built: a fan-out's steps start as they are queued.
PUBLISH_BATCH = 32


def queue_after_commit(task: Task, calls: Iterable[tuple]) -> None:
    """Queue ``task`` once for each argument tuple in ``calls`` when the
    transaction commits (at once outside one), published together.

    One by one, each publish on Redis made a new client and waited for its
    own LPUSH: about half a millisecond, and a fan-out of 500 steps spent a
    quarter of a second queueing them from one process. kombu's
    ``Producer.batch`` pipelines them (the memory broker publishes each at
    once). A publish that fails loses the calls not yet sent, as failed
    publishes one by one would: the sweeper re-enqueues a silent run's work
    (runs/leases.py, ZENWEB_RESUME_AFTER)."""
    calls = list(calls)
    if calls:
        transaction.on_commit(lambda: publish(task, calls), robust=True)


def publish(task: Task, calls: list[tuple]) -> None:
    """Publish ``task`` with each of ``calls`` now, in batches (kombu >= 5.7)."""
    with task.app.producer_or_acquire() as producer, producer.batch(PUBLISH_BATCH):
        for args in calls:
            task.apply_async(args, producer=producer)
