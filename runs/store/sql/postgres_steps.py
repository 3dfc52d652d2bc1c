"""PostgreSQL's claims and starts of steps: each one statement (RETURNING
the step with its run, workflow and creator; SKIP LOCKED among workers
draining one run) where the general store (runs/store/sql/store.py)
reads, then writes."""

from __future__ import annotations

import functools
from datetime import datetime

from agents.events import Event as RuntimeEvent
from runs.models import Event, Run, Step
from runs.store.sql.events import EVENT_ROWS, events_params, insert_events_from
from runs.store.sql.queued_turns import queued_params
from runs.store.sql.rows import LEASE_ONLY_COMMIT, column_of, database, db_value, table
from runs.store.sql.steps import (
    Successor,
    lease_grace,
    prefilter_guess_holds,
    prefilter_guess_params,
    step_for_turn_columns,
    step_with_run,
)
from runs.store.sql.store import Store


class PostgresSteps(Store):
    def outside_transaction(self) -> bool:
        """No transaction open: a statement sent now commits on its own (and
        may commit without waiting for the disk: LEASE_ONLY_COMMIT), a
        pipeline may begin and commit its own (postgres.py)."""
        return not database().in_atomic_block

    def claim_step_for_turn(self, step_pk: int, turn: int, owner: str, expires, now):
        """One statement: the claim, returning the step loaded for its turn.
        On its own, it commits without waiting for the disk (LEASE_ONLY_COMMIT)."""
        params = {
            "owner": owner,
            "expires": db_value(Step, "lease_expires", expires),
            "step": step_pk,
            "running": Step.Status.RUNNING,
            "previous_turn": turn - 1,
            "run_running": Run.Status.RUNNING,
            "now": db_value(Step, "lease_expires", now),
            "grace": lease_grace(),
        }
        lease_free = self.lease_free("s.", "%(owner)s", "%(now)s", "%(grace)s")
        rows = self.fetch_all(_claim_step_for_turn_sql(lease_free, lease_only=self.outside_transaction()), params)
        if not rows:
            if not Step.objects.filter(pk=step_pk).exists():
                raise Step.DoesNotExist(f"step {step_pk} does not exist")
            return None
        return step_with_run(rows[0])

    def start_steps(self, run_id: int, starts: list[tuple[int, RuntimeEvent]], now) -> tuple[list[int], int | None]:
        """One statement, in the caller's transaction or committed on its own."""
        if not starts:
            return [], None
        params = events_params(run_id, [(event, now) for _, event in starts])
        params |= {
            "steps": [pk for pk, _ in starts],
            "running": Step.Status.RUNNING,
            "pending": Step.Status.PENDING,
            "now": now,
        }
        ((started, last_seq),) = self.fetch_all(_start_steps_sql(), params)
        return sorted(started or (), key=[pk for pk, _ in starts].index), last_seq

    def start_and_claim_step(self, run_id: int, successor: Successor) -> tuple[Step, int] | None:
        """One statement, in the caller's transaction or committed on its own."""
        rows = self.fetch_all(*self.start_and_claim_statement(run_id, successor))
        return started_and_claimed(rows[0] if rows else None)

    def start_and_claim_statement(
        self, run_id: int, successor: Successor, *, after: tuple[int, datetime] | None = None
    ) -> tuple[str, dict]:
        """start_and_claim_step's statement and parameters: for a caller that
        sends it with others (write_last_turn). ``after``: a step (its id) and
        the ``finished`` time (as the database takes it) a write earlier in
        the same transaction gave it: the step starts only if that write
        happened."""
        params = events_params(run_id, [(successor.event, successor.now)])
        params |= {
            **prefilter_guess_params(),
            "step": successor.pk,
            "pending": Step.Status.PENDING,
            "running": Step.Status.RUNNING,
            "owner": successor.owner,
            "expires": db_value(Step, "lease_expires", successor.expires),
            "now": db_value(Step, "started", successor.now),
        }
        if after is not None:
            params |= {"after_step": after[0], "after_finished": after[1]}
        return _start_and_claim_sql(self.dependencies_of_s, after is not None), params

    def claim_queued_first_turn(
        self, run_id: int, owner: str, expires: datetime, now: datetime, after: int = 0
    ) -> tuple[Step | None, bool]:
        """One statement, which skips the rows other workers are claiming
        (``FOR UPDATE SKIP LOCKED``): workers draining one run never wait for
        each other."""
        params = queued_params(run_id, owner, expires, now, after)
        rows = self.fetch_all(_claim_sql(self.waiting_where(), lease_only=self.outside_transaction()), params)
        if not rows:
            # None waits, the run stopped, or every waiting row is being claimed by others.
            return None, False
        return step_with_run(rows[0][:-1]), bool(rows[0][-1])


def started_and_claimed(row) -> tuple[Step, int] | None:
    """What start_and_claim_step returns, from its statement's row."""
    if row is None:
        return None
    return step_with_run(row[:-1]), row[-1]


@functools.cache
def _claim_step_for_turn_sql(lease_free: str, *, lease_only: bool) -> str:
    columns, joins = step_for_turn_columns()
    lease_only_commit = f"AND {LEASE_ONLY_COMMIT} " if lease_only else ""
    return (
        f"UPDATE {table(Step)} s SET lease_owner = %(owner)s, lease_expires = %(expires)s, turn_queued = NULL "
        f"FROM {table(Run)} r {joins} "
        "WHERE s.id = %(step)s AND r.id = s.run_id AND s.status = %(running)s AND s.turns = %(previous_turn)s "
        f"AND r.status = %(run_running)s AND {lease_free} "
        f"{lease_only_commit}RETURNING {columns}"
    )


@functools.cache
def _start_steps_sql() -> str:
    """start_steps: the steps started (a conditional UPDATE), the events of
    those kept from the JSON document of them all (one per step, in order,
    joined on step_id), their count added to the run's counter (which locks
    the run row, as insert_events does) and the events numbered after it."""
    quote = database().ops.quote_name
    status, started, queued, step_id = (
        quote(column_of(Step, name)) for name in ("status", "started", "turn_queued", "step_id")
    )
    return (
        f"WITH started AS (UPDATE {table(Step)} SET {status} = %(running)s, {started} = %(now)s, "
        f"{queued} = %(now)s WHERE id = ANY(%(steps)s) AND {status} = %(pending)s RETURNING id, {step_id}), "
        "kept AS (SELECT e.type, e.step_id, e.data, e.created, row_number() OVER (ORDER BY e.n) AS n "
        f"FROM {EVENT_ROWS} JOIN started s ON s.{step_id} = e.step_id), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + (SELECT count(*) FROM kept) "
        "WHERE id = %(run)s AND EXISTS (SELECT 1 FROM kept) RETURNING last_event_seq), "
        f"inserted AS ({insert_events_from('bumped', 'kept e', '(SELECT count(*) FROM kept)')}) "
        f"SELECT (SELECT array_agg(id) FROM started), (SELECT max({quote(column_of(Event, 'seq'))}) "
        "FROM inserted)"
    )


@functools.cache
def _start_and_claim_sql(dependencies: str, after_write: bool = False) -> str:
    """start_and_claim_step: the step started and claimed (a conditional
    UPDATE returning its row), the run's counter bumped (which locks the run
    row, as insert_events does), its event numbered after it, and the step
    read back with its run, workflow, creator and unread count, as the claim
    reads them. ``after_write``: see start_and_claim_statement."""
    columns, joins = step_for_turn_columns()
    seq = database().ops.quote_name(column_of(Event, "seq"))
    after = (
        f"AND EXISTS(SELECT 1 FROM {table(Step)} f WHERE f.id = %(after_step)s AND f.finished = %(after_finished)s) "
        if after_write
        else ""
    )
    return (
        f"WITH s AS (UPDATE {table(Step)} s SET status = %(running)s, started = %(now)s, lease_owner = %(owner)s, "
        f"lease_expires = %(expires)s, turn_queued = NULL FROM {table(Run)} r "
        "WHERE s.id = %(step)s AND s.status = %(pending)s AND r.id = s.run_id "
        f"AND {prefilter_guess_holds(dependencies)} {after}RETURNING s.*), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s "
        "WHERE id = %(run)s AND EXISTS (SELECT 1 FROM s) RETURNING last_event_seq), "
        f"inserted AS ({insert_events_from('bumped')}) "
        f"SELECT {columns}, (SELECT max({seq}) FROM inserted) FROM s JOIN {table(Run)} r ON r.id = s.run_id {joins}"
    )


@functools.cache
def _claim_sql(waiting_where: str, *, lease_only: bool) -> str:
    columns, joins = step_for_turn_columns()
    lease_only_commit = f"AND {LEASE_ONLY_COMMIT} " if lease_only else ""
    waiting = f"FROM {table(Step)} q WHERE {waiting_where}"
    # The row claimed is locked (others skip it); whether more wait after it is read without locking them.
    return (
        f"WITH claimed AS (SELECT q.id {waiting} ORDER BY q.id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        f"UPDATE {table(Step)} s SET lease_owner = %(owner)s, lease_expires = %(expires)s, turn_queued = NULL "
        f"FROM {table(Run)} r {joins} "
        "WHERE s.id = (SELECT id FROM claimed) AND r.id = s.run_id AND r.status = %(run_running)s "
        f"{lease_only_commit}RETURNING {columns}, EXISTS(SELECT 1 {waiting} AND q.id > s.id)"
    )
