"""A run's work claimed and loaded with what it needs: its start, its
coordinator's wake (and the wake counted)."""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, RouterMessage
from runs.models import Run, Step, Workflow
from runs.store.sql.mailboxes import MailboxStatements, router_messages, unread_statement
from runs.store.sql.rows import LEASE_ONLY_COMMIT, select_columns, table
from runs.store.sql.steps import WORKFLOW_TEXT, StepStatements, step_for_turn_columns, step_with_run


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
    depends_on: tuple[str, ...]  # the steps whose outputs it reads
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


class RunClaimStatements(StepStatements, MailboxStatements):
    def start_run(self, run_id: int, now: datetime) -> Run | None:
        """pending -> running for run ``run_id`` (started at ``now``, no stuck
        reason), and the run loaded with its workflow (but its text and stored
        spec), or None if it was not pending (a second delivery of its start).
        One statement on PostgreSQL; elsewhere (SQLite's RETURNING cannot read
        the workflow's columns) the run is read after."""
        values = {"status": Run.Status.RUNNING, "started": now, "stuck_reason": ""}
        if not self.update(Run, values, "id = %s AND status = %s", [run_id, Run.Status.PENDING]):
            return None
        return Run.objects.select_related("workflow").get(pk=run_id)

    def claim_wake(self, run_id: int) -> WakeRead | None:
        """Mark run ``run_id``'s coordinator busy (the run running, its
        coordinator idle), clearing its queued-wake mark, and read what the
        wake decides on (``read_wake``); None if another wake runs or the run
        is not running. One round trip on PostgreSQL, outside a transaction."""
        claimed = self.update(
            Run,
            {"coordinator_busy": True, "wake_queued": None},
            "id = %s AND status = %s AND NOT coordinator_busy",
            [run_id, Run.Status.RUNNING],
        )
        return self.read_wake(run_id) if claimed else None

    def read_wake(self, run_id: int) -> WakeRead:
        """Run ``run_id``'s coordinator (with its run), the run's other steps and
        the coordinator's unread mail: what a wake reads again when messages
        came while it ran. One round trip on PostgreSQL, outside a transaction."""
        coordinator, steps, inbox = (self.fetch_all(*statement) for statement in wake_reads(run_id))
        return wake_read(run_id, coordinator, steps, inbox)

    def count_wake(
        self, run_id: int, coordinator_pk: int, cycle: int, events: list[RuntimeEvent], now: datetime
    ) -> int:
        """Store a wake's first ``events`` (its agent_wake, perhaps a warning)
        and the coordinator's turns as ``cycle``, in one transaction: the
        events first, whose INSERT takes the run's lock (every writer takes it
        before a step's row). The seq of the last event. One round trip on
        PostgreSQL, outside any transaction, for the usual one event."""
        with transaction.atomic():
            seq = self.insert_events(run_id, [(event, now) for event in events])[-1]
            self.update(Step, {"turns": cycle}, "id = %s", [coordinator_pk])
        return seq


def wake_reads(run_id: int) -> list[tuple[str, dict]]:
    """The statements that read a wake's coordinator, its steps, then its inbox."""
    coordinator = (_coordinator_for_wake_sql(), {"run": run_id, "coordinator": COORDINATOR})
    steps = (_wake_steps_sql(), {"run": run_id, "coordinator_kind": Step.Kind.COORDINATOR})
    return [coordinator, steps, unread_statement(run_id, COORDINATOR)]


def wake_read(run_id: int, coordinator: list[tuple], step_rows: list[tuple], inbox_rows: list[tuple]) -> WakeRead:
    """A WakeRead of the rows of ``wake_reads``' statements."""
    if not coordinator:
        raise Step.DoesNotExist(f"run {run_id} has no coordinator")
    steps = [_wake_step(row) for row in step_rows]
    return WakeRead(step_with_run(coordinator[0]), steps, router_messages(inbox_rows))


def _wake_step(row: tuple) -> WakeStep:
    step_id, agent, instructions, status, output, error, depends_on, resuming = row
    # JSON comes as text (SQLite, Django's jsonb loader); SQLite's booleans are 0 and 1.
    ids = json.loads(depends_on) if isinstance(depends_on, str) else depends_on
    return WakeStep(step_id, agent, instructions, status, output, error, tuple(ids or ()), bool(resuming))


@functools.cache
def start_run_parts() -> tuple:
    """(model, attnames, SELECT list) of a run and its workflow (PostgreSQL's start_run)."""
    return tuple(
        (model, *select_columns(model, alias, without))
        for model, alias, without in ((Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT))
    )


@functools.cache
def start_run_sql() -> str:
    columns = ", ".join(select for _, _, select in start_run_parts())
    return (
        f"UPDATE {table(Run)} r SET status = %(status)s, started = %(started)s, stuck_reason = %(stuck_reason)s "
        f"FROM {table(Workflow)} w WHERE r.id = %(run)s AND r.status = %(pending)s AND w.id = r.workflow_id "
        f"RETURNING {columns}"
    )


@functools.cache
def claim_wake_sql() -> str:
    # read_wake's read of the coordinator, if the UPDATE claimed the wake;
    # its snapshot does not see that UPDATE (claim_wake sets what it wrote).
    return (
        f"WITH claimed AS (UPDATE {table(Run)} SET coordinator_busy = TRUE, wake_queued = NULL "
        # Pipelined outside any transaction (in_one_round_trip): LEASE_ONLY_COMMIT.
        f"WHERE id = %(run)s AND status = %(running)s AND NOT coordinator_busy AND {LEASE_ONLY_COMMIT} RETURNING id) "
        f"{_coordinator_for_wake_sql()} AND EXISTS(SELECT 1 FROM claimed)"
    )


@functools.cache
def _wake_steps_sql() -> str:
    return (
        f"SELECT {', '.join(WakeStep._fields)} FROM {table(Step)} "
        "WHERE run_id = %(run)s AND kind <> %(coordinator_kind)s ORDER BY position"
    )


@functools.cache
def _coordinator_for_wake_sql() -> str:
    columns, joins = step_for_turn_columns()
    return (
        f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} "
        "WHERE s.run_id = %(run)s AND s.step_id = %(coordinator)s"
    )
