"""What scheduling reads after a step ends, in one query."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from agents.router import COORDINATOR
from runs.models import Run, Step, Workflow
from runs.store.rows import (
    from_db,
    plain_cursor,
    table,
)
from runs.store.sql.mailboxes import unread_from


class ScheduleState(NamedTuple):
    """What scheduling reads after a step ends (a tuple: scheduling unpacks it)."""

    status: str
    coordinator_busy: bool
    coordinator_has_mail: bool
    has_pending: bool
    all_done: bool
    workflow_id: int
    workflow_created: datetime


def schedule_state(run_id: int) -> ScheduleState | None:
    """For scheduling after a step ends, in one query: the run's status and
    coordinator_busy, whether the coordinator has unread mail, whether a step
    is pending, whether every step is done (terminal, none being resumed),
    and its workflow's id and created. None if the run does not exist."""
    with plain_cursor() as cursor:
        cursor.execute(_schedule_state_sql(), {"coordinator": COORDINATOR, "run": run_id})
        row = cursor.fetchone()
    if row is None:
        return None
    return schedule_state_of(*row)


def schedule_state_of(status, busy, has_mail, has_pending, has_unfinished, workflow_id, created) -> ScheduleState:
    created = from_db(Workflow, "created", created)
    return ScheduleState(
        status, bool(busy), bool(has_mail), bool(has_pending), not has_unfinished, workflow_id, created
    )


@functools.cache
def _schedule_state_sql() -> str:
    # Plain SQL: the ORM took ten times longer to build this than
    # PostgreSQL to run it, after every step of a run.
    return (
        f"SELECT r.status, r.coordinator_busy, {schedule_flags('r.id')}, "
        f"r.workflow_id, w.created FROM {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id "
        "WHERE r.id = %(run)s"
    )


def schedule_flags(run: str, other_than: str = "") -> str:
    """Whether the coordinator of run ``run`` (a column or a placeholder) has
    unread mail, a step is pending, and a step other than ``other_than`` (a
    step's id column or a placeholder; empty: none) is unfinished. The
    coordinator's mailbox is the parameter ``coordinator``.

    The kinds and statuses are written in, not bound: a prepared statement's
    generic plan could not tell that its parameters match the partial
    indexes step_pending and step_unfinished (runs/models/runs.py), and would
    read every step of the run."""
    other = f" AND s.id <> {other_than}" if other_than else ""
    return (
        f"EXISTS(SELECT 1 {unread_from(run, '%(coordinator)s')}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} "
        f"AND s.kind = {_quoted(Step.Kind.STEP)} AND s.status = {_quoted(Step.Status.PENDING)}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} "
        f"AND (s.resuming OR s.status NOT IN ({_quoted(*Step.TERMINAL)})){other})"
    )


def _quoted(*values: str) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)
