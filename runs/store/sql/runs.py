"""Statements on the run row: its lock (taken first by every transaction
that changes a run's steps or mailboxes), its counters, and the coordinator's
wake requests."""

from __future__ import annotations

import functools
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs.models import Run
from runs.store.sql.base import Statements
from runs.store.sql.rows import (
    database,
    db_value,
    table,
)


class RunStatements(Statements):
    def lock_run(self, run_id: int) -> None:
        """Take the run row's lock first in every transaction that changes a
        run's steps or mailboxes: the same order everywhere (run, then steps) so
        two writers never deadlock, and event numbers follow commit order."""
        with self.cursor() as cursor:
            cursor.execute(lock_run_sql(), {"run": run_id})

    def bump_counter(self, run_id: int, counter: str) -> int:
        # The UPDATE locks the run row until commit, so two writers never get the
        # same number, and a rolled-back transaction gives its number back.
        # RETURNING (PostgreSQL, SQLite >= 3.35) saves a second round trip.
        if counter not in _COUNTERS:
            raise ValueError(f"not a run counter: {counter!r}")
        quote = database().ops.quote_name
        column = quote(counter)
        with self.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table(Run)} SET {column} = {column} + 1 WHERE id = %(run)s RETURNING {column}",
                {"run": run_id},
            )
            row = cursor.fetchone()
        if row is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        return row[0]

    def request_wake(self, run_id: int) -> bool:
        """Count a reason for the coordinator to wake: whether no wake task need
        be queued (see wake_sql)."""
        with self.cursor() as cursor:
            cursor.execute(request_wake_sql(), request_wake_params(run_id))
            row = cursor.fetchone()
        if row is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        return bool(row[0])


@functools.cache
def lock_run_sql(run: str = "%(run)s") -> str:
    """The run's lock; ``run``: its id's placeholder (``update_sql`` puts
    it in a statement of positional parameters)."""
    lock = " FOR UPDATE" if database().features.has_select_for_update else ""
    return f"SELECT 1 FROM {table(Run)} WHERE id = {run}{lock}"


_COUNTERS = {"last_event_seq", "last_message_no"}


def cancelled(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).exists()


# A wake request queues a wake task only for an idle coordinator with none
# queued: every message a step sent to an idle coordinator queued one, and
# all but the first found nothing to do. The request that queues one marks
# the run (wake_queued); the wake that starts clears the mark, and so does a
# wake that finds another running (which reads what it was queued for) or a
# publish that failed. A mark older than a lease (ZENWEB_LEASE_SECONDS) is
# taken for a task the broker lost and holds nothing back.
def wake_sql(requests: str) -> tuple[str, str]:
    """For an UPDATE of the run row that adds ``requests`` (SQL) wake
    requests: the SET of the mark, and the RETURNING column that is true
    when no wake task need be queued (the coordinator busy, or a wake
    already queued). Parameters: ``wake_params()`` (``stale`` and ``now``)."""
    marked = (
        f"wake_queued = CASE WHEN {requests} = 0 OR coordinator_busy OR wake_queued > %(stale)s "
        "THEN wake_queued ELSE %(now)s END"
    )
    return marked, "coordinator_busy OR COALESCE(wake_queued <> %(now)s, TRUE)"


def wake_params() -> dict:
    """The parameters of ``wake_sql``: when a mark stops counting, and now."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    return {"stale": db_value(Run, "wake_queued", stale), "now": db_value(Run, "wake_queued", now)}


@functools.cache
def request_wake_sql() -> str:
    """One wake request counted; parameters: ``request_wake_params``."""
    marked, held_back = wake_sql("1")
    return (
        f"UPDATE {table(Run)} SET wake_requests = wake_requests + 1, {marked} "
        f"WHERE id = %(run)s RETURNING {held_back} AS busy"
    )


def request_wake_params(run_id: int) -> dict:
    return {**wake_params(), "run": run_id}
