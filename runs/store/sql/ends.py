"""A run's end written, and what it may leave open (runs/actions/ending.py
closes it)."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from runs.models import Approval, Command, Run, Step, ToolCall, ToolExecution
from runs.store.sql.base import Statements
from runs.store.sql.rows import db_value, table


class LeftOpen(NamedTuple):
    """What a run that ends may leave open, each one whether it does."""

    calls: bool  # tool calls queued or running
    executions: bool  # tool executions running (runs/store/journal.py)
    approvals: bool  # approvals pending
    children: bool  # child runs its calls started, not ended
    command: bool  # the command that started it, whose result is written at the end


class EndStep(NamedTuple):
    """What a run's end reads of each of its steps (the coordinator too)."""

    step_id: str
    kind: str
    status: str
    error: str
    resuming: bool
    mailbox_closed_reason: str


class RunEnd(NamedTuple):
    """A run's end, as ``end_run`` writes it."""

    status: str
    error: str
    result: str
    finished: datetime
    coordinator_status: str  # its coordinator step's end
    coordinator_error: str  # the coordinator's error, unless it has one


class EndStatements(Statements):
    def end_steps(self, run_id: int) -> list[EndStep]:
        """Run ``run_id``'s steps, in order, as its end reads them."""
        rows = self.fetch_all(end_steps_sql(), {"run": run_id})
        return [EndStep._make((*row[:4], bool(row[4]), row[5])) for row in rows]  # SQLite's booleans: 0, 1

    def end_run(self, run_id: int, end: RunEnd) -> LeftOpen:
        """Write run ``run_id``'s ``end`` (its coordinator no longer busy) and
        its coordinator step's, and read what the run leaves open: three
        statements (one on PostgreSQL, which has UPDATE in a WITH)."""
        params = end_run_params(run_id, end)
        with self.cursor() as cursor:
            cursor.execute(run_ended_sql(), params)
            cursor.execute(coordinator_ended_sql(), params)
            cursor.execute(left_open_sql(), params)
            return LeftOpen(*(bool(flag) for flag in cursor.fetchone()))


def end_run_params(run_id: int, end: RunEnd) -> dict:
    return {
        **end._asdict(),
        "finished": db_value(Run, "finished", end.finished),
        "run": run_id,
        "coordinator_kind": Step.Kind.COORDINATOR,
        **_left_open_params(),
    }


@functools.cache
def end_steps_sql() -> str:
    return f"SELECT {', '.join(EndStep._fields)} FROM {table(Step)} WHERE run_id = %(run)s ORDER BY position"


@functools.cache
def end_run_sql() -> str:
    # Both UPDATEs run whether or not the SELECT reads them; it reads with
    # the statement's snapshot, which neither changes.
    return f"WITH ended AS ({run_ended_sql()}), coordinator AS ({coordinator_ended_sql()}) {left_open_sql()}"


@functools.cache
def run_ended_sql() -> str:
    return (
        f"UPDATE {table(Run)} SET status = %(status)s, error = %(error)s, result = %(result)s, "
        "finished = %(finished)s, coordinator_busy = FALSE WHERE id = %(run)s"
    )


@functools.cache
def coordinator_ended_sql() -> str:
    return (
        f"UPDATE {table(Step)} SET status = %(coordinator_status)s, finished = %(finished)s, "
        "error = CASE WHEN error = '' THEN %(coordinator_error)s ELSE error END "
        "WHERE run_id = %(run)s AND kind = %(coordinator_kind)s"
    )


def _left_open_params() -> dict:
    return {
        "queued": ToolCall.Status.QUEUED,
        "running": ToolCall.Status.RUNNING,
        "executing": ToolExecution.Status.RUNNING,
        "pending": Approval.Status.PENDING,
        **{f"ended_{n}": status for n, status in enumerate(sorted(Run.TERMINAL))},
    }


@functools.cache
def left_open_sql() -> str:
    ended = ", ".join(f"%(ended_{n})s" for n in range(len(Run.TERMINAL)))
    return (
        f"SELECT EXISTS(SELECT 1 FROM {table(ToolCall)} c WHERE c.run_id = %(run)s "
        "AND c.status IN (%(queued)s, %(running)s)), "
        f"EXISTS(SELECT 1 FROM {table(ToolExecution)} x JOIN {table(Step)} s ON s.id = x.step_id "
        "WHERE s.run_id = %(run)s AND x.status = %(executing)s), "
        f"EXISTS(SELECT 1 FROM {table(Approval)} a WHERE a.run_id = %(run)s AND a.status = %(pending)s), "
        f"EXISTS(SELECT 1 FROM {table(Run)} child JOIN {table(ToolCall)} t ON t.id = child.parent_tool_call_id "
        f"WHERE t.run_id = %(run)s AND child.status NOT IN ({ended})), "
        f"EXISTS(SELECT 1 FROM {table(Command)} k WHERE k.run_id = %(run)s)"
    )
