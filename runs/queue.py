"""Queueing the tasks of runs/tasks.py by their registered names.

The actions and the store queue work; the tasks call the actions. Queued by
name (the task objects of runs/tasks.py, looked up in the Celery app's
registry), the actions and the store never import runs.tasks, and the
layers of runs point one way only. runs/apps.py imports runs.tasks, so its
tasks are registered in every process (web and worker).

Every task of the app is a ``RecordedTask`` (runs/outbox.py): a publish that
fails is kept for the sweeper to send again.
"""

from __future__ import annotations

from collections.abc import Iterable

from celery import Task, current_app
from django.db import transaction

from runs import outbox

# The names runs/tasks.py registers (tests/integration/test_queue_names.py
# checks that each one is a registered task).
START_RUN = "runs.tasks.start_run"
RUN_STEP_TURN = "runs.tasks.run_step_turn"
TAKE_QUEUED_TURNS = "runs.tasks.take_queued_turns"
STOP_WAITING_STEP = "runs.tasks.stop_waiting_step"
WAKE_COORDINATOR = "runs.tasks.wake_coordinator"
RESUME_STEP = "runs.tasks.resume_step"
JUDGE_LOOP = "runs.tasks.judge_loop"
END_ITERATION = "runs.tasks.end_iteration"
NEXT_ITERATION = "runs.tasks.next_iteration"
DELIVER_CHILD_RESULT = "runs.tasks.deliver_child_result"
EXECUTE_APPROVED_CALL = "runs.tasks.execute_approved_call"
EXECUTE_TOOL_CALL = "runs.tasks.execute_tool_call"
EMAIL_APPROVERS = "runs.tasks.email_approvers"
POST_APPROVAL_WEBHOOK = "runs.tasks.post_approval_webhook"

NAMES = (
    START_RUN,
    RUN_STEP_TURN,
    TAKE_QUEUED_TURNS,
    STOP_WAITING_STEP,
    WAKE_COORDINATOR,
    RESUME_STEP,
    JUDGE_LOOP,
    END_ITERATION,
    NEXT_ITERATION,
    DELIVER_CHILD_RESULT,
    EXECUTE_APPROVED_CALL,
    EXECUTE_TOOL_CALL,
    EMAIL_APPROVERS,
    POST_APPROVAL_WEBHOOK,
)

# Messages a batch publishes per round trip to Redis. Workers take the first
# ones while the rest are built: a fan-out's steps start as they are queued.
PUBLISH_BATCH = 32


def registered(name: str) -> Task:
    """The registered task called ``name``."""
    return current_app.tasks[name]


def send(name: str, *args) -> None:
    """Queue task ``name`` with ``args`` now."""
    registered(name).delay(*args)


def send_after_commit(name: str, *args) -> None:
    """Queue task ``name`` with ``args`` when the transaction commits (at
    once outside one)."""
    transaction.on_commit(lambda: send(name, *args), robust=True)


def send_after_commit_in(seconds: float, name: str, *args) -> None:
    """Queue task ``name`` with ``args`` to run ``seconds`` after the
    transaction commits."""
    transaction.on_commit(lambda: registered(name).apply_async(args, countdown=seconds), robust=True)


def queue_after_commit(name: str, calls: Iterable[tuple]) -> None:
    """Queue task ``name`` once for each argument tuple in ``calls`` when the
    transaction commits (at once outside one), published together.

    One by one, each publish on Redis made a new client and waited for its
    own LPUSH: about half a millisecond, and a fan-out of 500 steps spent a
    quarter of a second queueing them from one process. kombu's
    ``Producer.batch`` pipelines them (the memory broker publishes each at
    once). If the broker is away, the calls are kept for the sweeper to
    send again (runs/outbox.py)."""
    calls = list(calls)
    if calls:
        transaction.on_commit(lambda: publish(registered(name), calls), robust=True)


def publish(task: Task, calls: list[tuple]) -> None:
    """Publish ``task`` with each of ``calls`` now, in batches (kombu >= 5.7)."""
    try:
        with task.app.producer_or_acquire() as producer, producer.batch(PUBLISH_BATCH):
            for args in calls:
                task.apply_async(args, producer=producer)
    except outbox.PUBLISH_ERRORS as exc:
        # Some may have gone out: sent twice, a task does nothing the second time.
        outbox.record(task.name, [(tuple(args), {}) for args in calls], exc)
