"""Tasks whose publish failed are kept, not lost.

Work is queued after its transaction commits; if the broker is away then
(a Redis restart, a network blip), the publish fails when nothing can be
rolled back any more. Every task of the app is a ``RecordedTask``
(zenweb/celery.py): a publish that fails is written to ``UnsentTask``
instead, and the sweeper of every worker (runs/sweeper.py) sends those again
as soon as the broker answers. Tasks are safe to run twice, so a row sent
twice (two sweepers, a publish that failed after all) does no harm.
"""

from __future__ import annotations

import logging

from celery import Task, current_app
from django.db import DatabaseError, transaction
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# What a publish raises when the broker cannot be reached.
PUBLISH_ERRORS = (BrokerError, RedisError, OSError)
# Rows one sweep sends at most (the rest wait for the next sweep).
SEND_BATCH = 500


class RecordedTask(Task):
    """A task whose failed publish is recorded for the sweeper to send again."""

    def apply_async(self, args=None, kwargs=None, task_id=None, producer=None, link=None, link_error=None, **options):
        try:
            return super().apply_async(args, kwargs, task_id, producer, link, link_error, **options)
        except PUBLISH_ERRORS as exc:
            if producer is not None or self.app.conf.task_always_eager:
                # One of a batch (publish() records the whole batch), or the
                # task's own error when run eagerly: not a failed publish.
                raise
            record(self.name, [(tuple(args or ()), dict(kwargs or {}))], exc)
            return None


def record(name: str, calls: list[tuple[tuple, dict]], exc: BaseException) -> None:
    """Keep ``calls`` of task ``name`` for the sweeper. Never raises: a
    database that is away too leaves the work to the sweeper's deadlines."""
    # Not a circle: zenweb/celery.py loads RecordedTask when the Celery app is
    # made, before Django's apps are ready, when models cannot be imported.
    from runs.models import UnsentTask

    error = f"{type(exc).__name__}: {exc}"[:300]
    log.warning("could not queue %d %s task(s), kept for the sweeper: %s", len(calls), name, error)
    try:
        UnsentTask.objects.bulk_create(
            [UnsentTask(name=name, args=list(args), kwargs=kwargs, error=error) for args, kwargs in calls]
        )
    except DatabaseError:
        log.exception("could not keep %d %s task(s) either: the sweeper's deadlines find the work", len(calls), name)


def send_unsent() -> int:
    """Send the kept tasks, oldest first; stop at the first that fails (the
    broker is still away). Returns how many were sent."""
    from runs.models import UnsentTask  # loaded before the app registry: see record

    sent = 0
    for row in UnsentTask.objects.all()[:SEND_BATCH]:
        task = current_app.tasks.get(row.name)
        if task is not None:
            try:
                # Task.apply_async of Celery's own: a failure here must not record the row again.
                Task.apply_async(task, tuple(row.args), row.kwargs)
            except PUBLISH_ERRORS as exc:
                log.info("the broker is still away (%s): %d task(s) wait", exc, UnsentTask.objects.count())
                break
        with transaction.atomic():
            UnsentTask.objects.filter(pk=row.pk).delete()
        sent += 1
    return sent


def unsent_start_error(run_id: int) -> str:
    """Why the start task of a run was not queued, if it was not."""
    from runs.models import UnsentTask  # loaded before the app registry: see record

    row = UnsentTask.objects.filter(name="runs.tasks.start_run", args=[run_id]).order_by("-id").first()
    return row.error if row else ""
