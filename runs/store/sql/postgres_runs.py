"""PostgreSQL's run claims and a step's last turn: each one statement, or
one round trip outside a transaction (a pipeline), where the general store
(runs/store/sql/store.py) sends several."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR
from runs.models import Run, Step
from runs.store.sql.events import events_params, insert_events_sql
from runs.store.sql.pg_text import json_text
from runs.store.sql.postgres_steps import PostgresSteps, started_and_claimed
from runs.store.sql.rows import db_value, first, instances
from runs.store.sql.run_claims import WakeRead, claim_wake_sql, start_run_parts, start_run_sql, wake_read, wake_reads
from runs.store.sql.runs import lock_run_sql
from runs.store.sql.schedule import schedule_state_of, step_rows_of
from runs.store.sql.turns import LastTurn, LastTurnWritten, turn_params, write_sql
from runs.store.sql.writes import update_sql


class PostgresRuns(PostgresSteps):
    def start_run(self, run_id: int, now: datetime) -> Run | None:
        """One statement: the UPDATE returns the run with its workflow."""
        values = {"status": Run.Status.RUNNING, "started": db_value(Run, "started", now), "stuck_reason": ""}
        params = {**values, "run": run_id, "pending": Run.Status.PENDING}
        rows = self.fetch_all(start_run_sql(), params)
        if not rows:
            return None
        (run, workflow), _ = instances([(model, names) for model, names, _ in start_run_parts()], rows[0])
        Run._meta.get_field("workflow").set_cached_value(run, workflow)
        return run

    def claim_wake(self, run_id: int) -> WakeRead | None:
        """One round trip outside a transaction: the claim and the reads."""
        if not self.can_pipeline():
            return super().claim_wake(run_id)
        params = {"run": run_id, "running": Run.Status.RUNNING, "coordinator": COORDINATOR}
        claimed, steps, inbox = self.in_one_round_trip([(claim_wake_sql(), params), *wake_reads(run_id)[1:]])
        if not claimed:
            return None
        wake = wake_read(run_id, claimed, steps, inbox)
        wake.coordinator.run.coordinator_busy, wake.coordinator.run.wake_queued = True, None  # as the UPDATE left them
        return wake

    def read_wake(self, run_id: int) -> WakeRead:
        """One round trip outside a transaction."""
        if not self.can_pipeline():
            return super().read_wake(run_id)
        coordinator, steps, inbox = self.in_one_round_trip(wake_reads(run_id))
        return wake_read(run_id, coordinator, steps, inbox)

    def count_wake(
        self, run_id: int, coordinator_pk: int, cycle: int, events: list[RuntimeEvent], now: datetime
    ) -> int:
        """One round trip outside a transaction, for the usual one event."""
        if len(events) != 1 or not self.can_pipeline():
            return super().count_wake(run_id, coordinator_pk, cycle, events, now)
        counted, params = update_sql(Step, {"turns": cycle}, "id = %s", [coordinator_pk])
        numbered = [(event, now) for event in events]
        rows = self.in_one_round_trip(
            [(insert_events_sql(), events_params(run_id, numbered)), (f"{counted} RETURNING id", params)]
        )
        if not rows[0] or not rows[1]:
            raise Run.DoesNotExist(f"run {run_id} or its coordinator does not exist")
        return rows[0][0][0]

    def write_last_turn(self, last: LastTurn, *, commit: bool = True) -> LastTurnWritten | None:
        """The run's lock, then one statement that does it all, sent at once
        and committed (``commit``; ``in_one_round_trip``), or inside the
        caller's transaction (``in_order``). Documents go as JSON text,
        serialized here: psycopg would serialize them between sending the
        lock and sending this statement, while the lock is held (about 0.1 ms
        a turn)."""
        step, successor = last.step, last.successor
        params = {
            **turn_params(last, json_text(last.transcript)),
            "with_steps": last.with_steps,
            **events_params(step.run_id, last.events),
        }
        statements = [
            (lock_run_sql(), {"run": step.run_id}),
            (write_sql(self.depends_on, tuple(last.completed)), params),
        ]
        if successor is not None:
            # Only if this write happened: the step finished at this write's time.
            after = (step.pk, params["completed_finished"])
            statements.append(self.start_and_claim_statement(step.run_id, successor, after=after))
        if not commit:
            rows = self.in_order(statements)
        elif self.can_pipeline():
            rows = self.in_one_round_trip(statements)
        else:
            with transaction.atomic():  # inside a caller's transaction: a savepoint of its own
                rows = self.in_order(statements)
        row = first(rows[1])
        if row is None:
            return None
        last_seq, *state, steps = row
        started = started_and_claimed(first(rows[2])) if successor is not None else None
        steps = None if steps is None else step_rows_of(steps)
        return LastTurnWritten(last_seq, schedule_state_of(*state), steps, started)
