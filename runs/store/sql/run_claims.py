"""A run's work claimed and loaded with what it needs: its start, its
coordinator's wake (and the wake counted)."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, RouterMessage
from runs.models import Run, Step, Workflow
from runs.store.sql.events import events_params, insert_events, insert_events_sql
from runs.store.sql.mailboxes import router_messages, unread_statement
from runs.store.sql.rows import (
    LEASE_ONLY_COMMIT,
    database,
    db_value,
    in_one_round_trip,
    instances,
    plain_cursor,
    select_columns,
    table,
)
from runs.store.sql.runs import can_pipeline
from runs.store.sql.steps import WORKFLOW_TEXT, step_for_turn_columns, step_for_turn_parts, step_with_run
from runs.store.sql.writes import update, update_sql


def start_run(run_id: int, now: datetime) -> Run | None:
    """pending -> running for run ``run_id`` (started at ``now``, no stuck
    reason), and the run loaded with its workflow (but its text and stored
    spec), or None if it was not pending (a second delivery of its start).
    One statement on PostgreSQL; SQLite's RETURNING cannot read the
    workflow's columns, so there the run is read after."""
    vendor = database().vendor
    values = {"status": Run.Status.RUNNING, "started": now, "stuck_reason": ""}
    if vendor != "postgresql":
        if not update(Run, values, "id = %s AND status = %s", [run_id, Run.Status.PENDING]):
            return None
        return Run.objects.select_related("workflow").get(pk=run_id)
    parts = [(model, names) for model, names, _ in _start_run_parts(vendor)]
    params = {**values, "started": db_value(Run, "started", now), "run": run_id, "pending": Run.Status.PENDING}
    with plain_cursor() as cursor:
        cursor.execute(_start_run_sql(vendor), params)
        row = cursor.fetchone()
    if row is None:
        return None
    (run, workflow), _ = instances(parts, row)
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    return run


class WakeStep(NamedTuple):
    """What a coordinator wake reads of each step (its prompts, all_done):
    rows, not model instances, which for a 500-step run cost 4-6 ms more a
    wake to build, and now and then a full garbage collection."""

    step_id: str
    agent: str
    instructions: str
    status: str
    output: str
    error: str
    resuming: bool


class WakeRead(NamedTuple):
    """What a coordinator's wake reads before it decides what to do."""

    # The coordinator loaded as step_for_turn loads a step: its run, the
    # run's workflow and creator, its unread count.
    coordinator: Step
    steps: list[WakeStep]  # the run's other steps, in order
    # The coordinator's unread mail, read after the steps: a step's messages
    # commit with its turns, before its end, so when every step read is
    # done, this holds everything they sent.
    inbox: list[RouterMessage]


def claim_wake(run_id: int) -> WakeRead | None:
    """Mark run ``run_id``'s coordinator busy (the run running, its
    coordinator idle), clearing its queued-wake mark, and read what the
    wake decides on (``read_wake``); None if another wake runs or the run
    is not running. One round trip on PostgreSQL, outside a transaction."""
    if not can_pipeline():
        claimed = update(
            Run,
            {"coordinator_busy": True, "wake_queued": None},
            "id = %s AND status = %s AND NOT coordinator_busy",
            [run_id, Run.Status.RUNNING],
        )
        return read_wake(run_id) if claimed else None
    params = {"run": run_id, "running": Run.Status.RUNNING, "coordinator": COORDINATOR}
    claimed_rows, steps, inbox = in_one_round_trip([(_claim_wake_sql(), params), *_wake_reads(run_id)])
    if not claimed_rows:
        return None
    wake = _wake_read(claimed_rows[0], steps, inbox)
    wake.coordinator.run.coordinator_busy, wake.coordinator.run.wake_queued = True, None  # as the UPDATE left them
    return wake


def read_wake(run_id: int) -> WakeRead:
    """Run ``run_id``'s coordinator (with its run), the run's other steps and
    the coordinator's unread mail: what a wake reads again when messages
    came while it ran. One round trip on PostgreSQL, outside a transaction."""
    vendor = database().vendor
    statements = [(_coordinator_for_wake_sql(vendor), {"run": run_id, "coordinator": COORDINATOR})]
    statements += _wake_reads(run_id)
    if can_pipeline():
        coordinator, steps, inbox = in_one_round_trip(statements)
    else:
        coordinator, steps, inbox = (_rows(statement, params) for statement, params in statements)
    if not coordinator:
        raise Step.DoesNotExist(f"run {run_id} has no coordinator")
    return _wake_read(coordinator[0], steps, inbox)


def _wake_reads(run_id: int) -> list[tuple[str, dict]]:
    """The statements that read a wake's steps, then its inbox."""
    steps = (_wake_steps_sql(), {"run": run_id, "coordinator_kind": Step.Kind.COORDINATOR})
    return [steps, unread_statement(run_id, COORDINATOR)]


def _wake_read(coordinator_row: tuple, step_rows: list[tuple], inbox_rows: list[tuple]) -> WakeRead:
    parts = [(model, names) for model, names, _ in step_for_turn_parts(database().vendor)]
    steps = [WakeStep._make((*row[:-1], bool(row[-1]))) for row in step_rows]  # SQLite's booleans are 0 and 1
    return WakeRead(step_with_run(parts, coordinator_row), steps, router_messages(inbox_rows))


def _rows(statement: str, params: dict) -> list[tuple]:
    with plain_cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def count_wake(run_id: int, coordinator_pk: int, cycle: int, events: list[RuntimeEvent], now: datetime) -> int:
    """Store a wake's first ``events`` (its agent_wake, perhaps a warning)
    and the coordinator's turns as ``cycle``, in one transaction: the
    events first, whose INSERT takes the run's lock (every writer takes it
    before a step's row). The seq of the last event. One round trip on
    PostgreSQL, outside any transaction, for the usual one event."""
    numbered = [(event, now) for event in events]
    if len(events) != 1 or not can_pipeline():
        with transaction.atomic():
            seq = insert_events(run_id, numbered)[-1]
            update(Step, {"turns": cycle}, "id = %s", [coordinator_pk])
        return seq
    counted, params = update_sql(Step, {"turns": cycle}, "id = %s", [coordinator_pk])
    rows = in_one_round_trip(
        [(insert_events_sql(), events_params(run_id, numbered)), (f"{counted} RETURNING id", params)]
    )
    if not rows[0] or not rows[1]:
        raise Run.DoesNotExist(f"run {run_id} or its coordinator does not exist")
    return rows[0][0][0]


@functools.cache
def _start_run_parts(vendor: str) -> tuple:
    return tuple(
        (model, *select_columns(model, alias, vendor, without))
        for model, alias, without in ((Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT))
    )


@functools.cache
def _start_run_sql(vendor: str) -> str:
    columns = ", ".join(select for _, _, select in _start_run_parts(vendor))
    return (
        f"UPDATE {table(Run)} r SET status = %(status)s, started = %(started)s, stuck_reason = %(stuck_reason)s "
        f"FROM {table(Workflow)} w WHERE r.id = %(run)s AND r.status = %(pending)s AND w.id = r.workflow_id "
        f"RETURNING {columns}"
    )


@functools.cache
def _claim_wake_sql() -> str:
    # read_wake's read of the coordinator, if the UPDATE claimed the wake;
    # its snapshot does not see that UPDATE (claim_wake sets what it wrote).
    return (
        f"WITH claimed AS (UPDATE {table(Run)} SET coordinator_busy = TRUE, wake_queued = NULL "
        # Pipelined outside any transaction (in_one_round_trip): LEASE_ONLY_COMMIT.
        f"WHERE id = %(run)s AND status = %(running)s AND NOT coordinator_busy AND {LEASE_ONLY_COMMIT} RETURNING id) "
        f"{_coordinator_for_wake_sql('postgresql')} AND EXISTS(SELECT 1 FROM claimed)"
    )


@functools.cache
def _wake_steps_sql() -> str:
    return (
        f"SELECT {', '.join(WakeStep._fields)} FROM {table(Step)} "
        "WHERE run_id = %(run)s AND kind <> %(coordinator_kind)s ORDER BY position"
    )


@functools.cache
def _coordinator_for_wake_sql(vendor: str) -> str:
    columns, joins = step_for_turn_columns(vendor)
    return (
        f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} "
        "WHERE s.run_id = %(run)s AND s.step_id = %(coordinator)s"
    )
