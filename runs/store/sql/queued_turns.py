"""A run's first turns that wait queued, taken by whichever worker asks
next (runs.actions.scheduling.take_queued_turn, runs.tasks.take_queued_turns):
the claim of one of them."""

from __future__ import annotations

import functools
from datetime import datetime

from runs.models import Run, Step
from runs.store.sql.rows import db_value, table
from runs.store.sql.steps import StepStatements, lease_grace

# Claims that another worker's won first before this one gives up for now
# (each lost claim means a turn was taken: the queue moves): SQLite's, since
# PostgreSQL's claim skips the rows others are claiming.
SQLITE_TRIES = 8


class QueuedTurnStatements(StepStatements):
    def claim_queued_first_turn(
        self, run_id: int, owner: str, expires: datetime, now: datetime, after: int = 0
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

        Here the first two waiting steps are read and the first claimed
        (claim_step_for_turn's conditional UPDATE), read again if another
        worker's claim came first. One statement on PostgreSQL, which skips
        the rows other workers are claiming (``FOR UPDATE SKIP LOCKED``):
        workers draining one run never wait for each other."""
        params = queued_params(run_id, owner, expires, now, after)
        for _ in range(SQLITE_TRIES):
            waiting = [pk for (pk,) in self.fetch_all(_waiting_sql(self.waiting_where()), params)]
            if not waiting:
                return None, False
            step = self.claim_step_for_turn(waiting[0], 1, owner, expires, now)
            if step is not None:
                return step, len(waiting) > 1
        return None, True

    def waiting_where(self) -> str:
        """Which steps ``q`` of run %(run)s wait for their first turn, past
        %(after)s. The status is written into the statement, not passed: only
        then can a prepared statement's generic plan use step_running (a
        partial index on it); with a parameter PostgreSQL planned the claim
        anew each time."""
        return (
            f"q.run_id = %(run)s AND q.status = '{Step.Status.RUNNING}' AND q.id > %(after)s "
            "AND q.turns = 0 AND q.turn_queued IS NOT NULL "
            f"AND {self.lease_free('q.', '%(owner)s', '%(now)s', '%(grace)s')}"
        )


def queued_params(run_id: int, owner: str, expires: datetime, now: datetime, after: int) -> dict:
    return {
        "run": run_id,
        "after": after,
        "owner": owner,
        "expires": db_value(Step, "lease_expires", expires),
        "now": db_value(Step, "lease_expires", now),
        "grace": lease_grace(),
        "run_running": Run.Status.RUNNING,
    }


@functools.cache
def _waiting_sql(waiting: str) -> str:
    """The first two waiting steps' ids, while the run runs."""
    return (
        f"SELECT q.id FROM {table(Step)} q JOIN {table(Run)} r ON r.id = q.run_id "
        f"WHERE {waiting} AND r.status = %(run_running)s ORDER BY q.id LIMIT 2"
    )
