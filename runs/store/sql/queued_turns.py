"""A run's first turns that wait queued, taken by whichever worker asks
next (runs.actions.scheduling.take_queued_turn, runs.tasks.take_queued_turns):
the claim of one of them."""

from __future__ import annotations

import functools
from datetime import datetime

from runs.models import Run, Step
from runs.store.sql.rows import LEASE_ONLY_COMMIT, database, db_value, plain_cursor, table
from runs.store.sql.steps import (
    claim_step_for_turn,
    lease_free,
    lease_grace,
    step_for_turn_columns,
    step_for_turn_parts,
    step_with_run,
)

# Claims on SQLite that another worker's won first before this one gives up
# for now (each lost claim means a turn was taken: the queue moves).
SQLITE_TRIES = 8


def claim_queued_first_turn(
    run_id: int, owner: str, expires: datetime, now: datetime, after: int = 0
) -> tuple[Step | None, bool]:
    """Take the lease on the first turn of run ``run_id``'s first step (by
    id, past ``after``) that waits for it queued (running, no turn taken,
    marked ``Step.turn_queued``, no live lease at ``now`` but ``owner``'s),
    while the run runs, until ``expires``, clearing its queued mark. Returns
    the step loaded as ``step_for_turn`` loads it (None: none waits, or the
    run stopped), and whether another step of the run waited too.

    ``after``: the step this worker claimed last. Claims go in id order, so
    every waiting step before it was being claimed by another worker then:
    the next claim reads on from there (the step_running index, in id
    order), not from the run's first step again.

    One statement on PostgreSQL, which skips the rows other workers are
    claiming (``FOR UPDATE SKIP LOCKED``): workers draining one run never
    wait for each other."""
    db = database()
    params = {
        "run": run_id,
        "after": after,
        "owner": owner,
        "expires": db_value(Step, "lease_expires", expires),
        "now": db_value(Step, "lease_expires", now),
        "grace": lease_grace(),
        "run_running": Run.Status.RUNNING,
    }
    if db.vendor != "postgresql":
        return _claim_on_sqlite(db.vendor, params, owner, expires, now)
    with plain_cursor() as cursor:
        cursor.execute(_claim_sql(db.vendor, lease_only=not db.in_atomic_block), params)
        row = cursor.fetchone()
    if row is None:
        # None waits, the run stopped, or every waiting row is being claimed by others.
        return None, False
    parts = [(model, names) for model, names, _ in step_for_turn_parts(db.vendor)]
    return step_with_run(parts, row[:-1]), bool(row[-1])


def _claim_on_sqlite(
    vendor: str, params: dict, owner: str, expires: datetime, now: datetime
) -> tuple[Step | None, bool]:
    """The first two waiting steps read, the first claimed (claim_step_for_turn's
    conditional UPDATE); read again if another worker's claim came first."""
    for _ in range(SQLITE_TRIES):
        with plain_cursor() as cursor:
            cursor.execute(_waiting_sql(vendor), params)
            waiting = [pk for (pk,) in cursor.fetchall()]
        if not waiting:
            return None, False
        step = claim_step_for_turn(waiting[0], 1, owner, expires, now)
        if step is not None:
            return step, len(waiting) > 1
    return None, True


def _waiting_where(vendor: str) -> str:
    """Which steps ``q`` of run %(run)s wait for their first turn, past
    %(after)s. The status is written into the statement, not passed: only
    then can a prepared statement's generic plan use step_running (a
    partial index on it); with a parameter PostgreSQL planned the claim
    anew each time."""
    return (
        f"q.run_id = %(run)s AND q.status = '{Step.Status.RUNNING}' AND q.id > %(after)s "
        "AND q.turns = 0 AND q.turn_queued IS NOT NULL "
        f"AND {lease_free(vendor, 'q.', '%(owner)s', '%(now)s', '%(grace)s')}"
    )


@functools.cache
def _waiting_sql(vendor: str) -> str:
    """The first two waiting steps' ids, while the run runs (SQLite's claim)."""
    return (
        f"SELECT q.id FROM {table(Step)} q JOIN {table(Run)} r ON r.id = q.run_id "
        f"WHERE {_waiting_where(vendor)} AND r.status = %(run_running)s ORDER BY q.id LIMIT 2"
    )


@functools.cache
def _claim_sql(vendor: str, *, lease_only: bool) -> str:
    columns, joins = step_for_turn_columns(vendor)
    lease_only_commit = f"AND {LEASE_ONLY_COMMIT} " if lease_only else ""
    waiting = f"FROM {table(Step)} q WHERE {_waiting_where(vendor)}"
    # The row claimed is locked (others skip it); whether more wait after it is read without locking them.
    return (
        f"WITH claimed AS (SELECT q.id {waiting} ORDER BY q.id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        f"UPDATE {table(Step)} s SET lease_owner = %(owner)s, lease_expires = %(expires)s, turn_queued = NULL "
        f"FROM {table(Run)} r {joins} "
        "WHERE s.id = (SELECT id FROM claimed) AND r.id = s.run_id AND r.status = %(run_running)s "
        f"{lease_only_commit}RETURNING {columns}, EXISTS(SELECT 1 {waiting} AND q.id > s.id)"
    )
