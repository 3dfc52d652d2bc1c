"""Statements on the run row: its lock (taken first by every transaction
that changes a run's steps or mailboxes), its counters, and the coordinator's
wake requests."""

from __future__ import annotations

import functools
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from runs.models import Run
from runs.store.rows import (
    database,
    db_value,
    plain_cursor,
    table,
)


def lock_run(run_id: int) -> None:
    """Take the run row's lock first in every transaction that changes a
    run's steps or mailboxes: the same order everywhere (run, then steps) so
    two writers never deadlock, and event numbers follow commit order."""
    with plain_cursor() as cursor:
        cursor.execute(lock_run_sql(), [run_id])


def lock_run_sql() -> str:
    lock = " FOR UPDATE" if database().features.has_select_for_update else ""
    return f"SELECT 1 FROM {table(Run)} WHERE id = %s{lock}"


_COUNTERS = {"last_event_seq", "last_message_no"}


def bump_counter(run_id: int, counter: str) -> int:
    # The UPDATE locks the run row until commit, so two writers never get the
    # same number, and a rolled-back transaction gives its number back.
    # RETURNING (PostgreSQL, SQLite >= 3.35) saves a second round trip.
    if counter not in _COUNTERS:
        raise ValueError(f"not a run counter: {counter!r}")
    table = connection.ops.quote_name(Run._meta.db_table)
    column = connection.ops.quote_name(counter)
    with plain_cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} + 1 WHERE id = %s RETURNING {column}", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return row[0]


def can_pipeline() -> bool:
    """Whether a transaction can be sent in one round trip here
    (``in_one_round_trip``): PostgreSQL, outside any transaction."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


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
    already queued). Parameters: ``wake_params()``'s first list for the SET
    (after ``requests``' own, when it is a %s), its second for the RETURNING."""
    marked = (
        f"wake_queued = CASE WHEN {requests} = 0 OR coordinator_busy OR wake_queued > %s THEN wake_queued ELSE %s END"
    )
    return marked, "coordinator_busy OR COALESCE(wake_queued <> %s, TRUE)"


def wake_params() -> tuple[list, list]:
    """The parameters of ``wake_sql``'s SET (when a mark stops counting, and
    now) and of its RETURNING (now)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    now_value = db_value(Run, "wake_queued", now)
    return [db_value(Run, "wake_queued", stale), now_value], [now_value]


@functools.cache
def _wake_sql() -> str:
    marked, held_back = wake_sql("1")
    return (
        f"UPDATE {table(Run)} SET wake_requests = wake_requests + 1, {marked} "
        f"WHERE id = %s RETURNING {held_back} AS busy"
    )


def _wake_sql_params(run_id: int) -> list:
    marked, held_back = wake_params()
    return [*marked, run_id, *held_back]


def request_wake(run_id: int) -> bool:
    """Count a reason for the coordinator to wake: whether no wake task need
    be queued (see wake_sql)."""
    with plain_cursor() as cursor:
        cursor.execute(_wake_sql(), _wake_sql_params(run_id))
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return bool(row[0])
