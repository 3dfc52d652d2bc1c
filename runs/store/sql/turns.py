"""The statements that record a step's last turn (runs/store/last_turn.py
says when each runs): ``write_last_turn``, the whole transaction in one
round trip on PostgreSQL, and ``save_turn``, one statement inside the
turn's transaction on any database."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from django.db import connection

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason
from runs.models import Run, Step, Workflow
from runs.store.sql.events import events_params, insert_events_from
from runs.store.sql.mailboxes import unread_count_of, unread_from
from runs.store.sql.pg_text import json_text
from runs.store.sql.rows import column_of, concrete_field, first, in_one_round_trip, in_order, plain_cursor, table
from runs.store.sql.runs import lock_run_sql
from runs.store.sql.schedule import (
    ScheduleState,
    StepRow,
    pending_may_start,
    schedule_flags,
    schedule_state_of,
    step_rows_document,
    step_rows_of,
)
from runs.store.sql.steps import Successor, start_and_claim_statement, started_and_claimed


class LastTurnWritten(NamedTuple):
    """What ``write_last_turn`` gives back."""

    last_seq: int  # the seq of the turn's last event
    schedule: ScheduleState  # the run's, this step counted done
    # The run's steps, this one completed, when asked for and a pending
    # step may start: what scheduling decides on next, read with the write.
    steps: list[StepRow] | None
    # The successor started and claimed with the write, loaded for its
    # turn, and the seq of its step_start event (start_and_claim_step).
    started: tuple[Step, int] | None


class TurnSaved(NamedTuple):
    """What ``save_turn`` gives back: the step's counts after it."""

    prompt_tokens: int
    completion_tokens: int
    turns: int
    unread: int
    schedule: ScheduleState | None  # the run's, if the step completed (nothing unread)


def write_last_turn(
    step: Step,
    turn: int,
    transcript: list,
    tokens: tuple[int, int],
    completed: dict,
    events: list[tuple[RuntimeEvent, datetime]],
    *,
    with_steps: bool = False,
    successor: Successor | None = None,
    commit: bool = True,
) -> LastTurnWritten | None:
    """The run's lock, then one statement that records turn ``turn`` of
    ``step``, completes it with ``completed`` (field -> value, the status
    among them), closes its
    mailbox, stores ``events`` numbered after the run's last and reads what
    scheduling needs (``with_steps``: the run's step rows too, if a pending
    step may start): sent at once and committed (PostgreSQL, outside any
    transaction). None, having written nothing, if the step has unread
    mail or is no longer running turn ``turn``.

    ``successor``: a step this completion is expected to start (the state
    machine's guess from the rows the worker read before): started and
    claimed in the same transaction, after the write, if start_and_claim_step's
    conditions hold then and this write completed the step. A chain's
    next step starts without a transaction of its own.

    ``commit=False``: inside the caller's transaction, which goes on holding
    the run's lock (rows.in_order): for a completion whose successors are
    decided under that lock before it commits."""
    # Documents go as JSON text, serialized here: psycopg would serialize
    # them between sending the lock and sending this statement, while the
    # lock is held (about 0.1 ms a turn).
    params = {
        "turn": turn,
        "previous_turn": turn - 1,
        "transcript": json_text(transcript),
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
        **_completed_params(completed),
        "closed_reason": str(DropReason.TARGET_TERMINAL),
        "step": step.pk,
        "running": Step.Status.RUNNING,
        "run": step.run_id,
        "mailbox": step.step_id,
        "coordinator": COORDINATOR,
        "with_steps": with_steps,
        **events_params(step.run_id, events),
    }
    statements = [(lock_run_sql(), {"run": step.run_id}), (_write_sql(tuple(completed)), params)]
    if successor is not None:
        # Only if this write happened: the step finished at this write's time.
        after = (step.pk, params["completed_finished"])
        statements.append(start_and_claim_statement(step.run_id, successor, after=after))
    rows = in_one_round_trip(statements) if commit else in_order(statements)
    row = first(rows[1])
    if row is None:
        return None
    last_seq, *state, steps = row
    started = started_and_claimed(first(rows[2])) if successor is not None else None
    steps = None if steps is None else step_rows_of(steps)
    return LastTurnWritten(last_seq, schedule_state_of(*state), steps, started)


def save_turn(step: Step, transcript: list, tokens: tuple[int, int], completed: dict) -> TurnSaved:
    """Store a step's turn (``transcript``, ``tokens`` added: prompt,
    completion) and, if its mailbox holds nothing unread, complete the step
    with ``completed`` (field -> value) and close its mailbox as
    target-terminal (a closed mailbox keeps its reason): one statement."""
    params = {
        "transcript": Step._meta.get_field("transcript").get_db_prep_save(transcript, connection),
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
        **_completed_params(completed),
        "closed_reason": str(DropReason.TARGET_TERMINAL),
        "step": step.pk,
        "run": step.run_id,
        "mailbox": step.step_id,
        "coordinator": COORDINATOR,
    }
    with plain_cursor() as cursor:
        cursor.execute(_save_sql(tuple(completed)), params)
        row = cursor.fetchone()
    if row is None:
        raise Step.DoesNotExist(f"step {step.pk} does not exist")
    prompt_tokens, completion_tokens, turns, unread, *state = row
    return TurnSaved(prompt_tokens, completion_tokens, turns, unread, None if unread else schedule_state_of(*state))


def _completed_params(completed: dict) -> dict:
    return {
        f"completed_{name}": concrete_field(Step, name).get_db_prep_save(value, connection)
        for name, value in completed.items()
    }


def _completed_column(name: str) -> str:
    return connection.ops.quote_name(column_of(Step, name))


@functools.cache
def _write_sql(completed: tuple[str, ...]) -> str:
    sets = ", ".join(f"{_completed_column(name)} = %(completed_{name})s" for name in completed)
    return (
        f"WITH done AS (UPDATE {table(Step)} SET turns = %(turn)s, lease_owner = '', lease_expires = NULL, "
        "transcript = %(transcript)s::jsonb, prompt_tokens = prompt_tokens + %(prompt_tokens)s, "
        f"completion_tokens = completion_tokens + %(completion_tokens)s, {sets}, mailbox_closed_reason = "
        "CASE WHEN mailbox_closed_reason = '' THEN %(closed_reason)s ELSE mailbox_closed_reason END "
        "WHERE id = %(step)s AND status = %(running)s AND turns = %(previous_turn)s "
        f"AND NOT EXISTS(SELECT 1 {unread_from('%(run)s', '%(mailbox)s')}) "
        "RETURNING run_id), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s "
        "WHERE id = (SELECT run_id FROM done) RETURNING last_event_seq), "
        f"added AS ({insert_events_from('bumped')}) "
        # Read with the statement's snapshot, which holds neither write above:
        # the flags leave this step out, as done.
        # The steps are read only if one of them may start now.
        "SELECT bumped.last_event_seq, r.status, r.coordinator_busy, "
        f"{schedule_flags('r.id', '%(step)s', may_start='pending.may_start')}, "
        "r.workflow_id, w.created, CASE WHEN %(with_steps)s AND pending.may_start "
        f"THEN {step_rows_document('r.id', '%(step)s', '%(completed_status)s')} END "
        f"FROM bumped, {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id, "
        f"LATERAL (SELECT {pending_may_start('r.id', '%(step)s')} AS may_start) pending WHERE r.id = %(run)s"
    )


@functools.cache
def _save_sql(completed: tuple[str, ...]) -> str:
    unread = unread_count_of("%(run)s", "%(mailbox)s")
    empty = f"{unread} = 0"
    cases = ", ".join(
        f"{column} = CASE WHEN {empty} THEN %(completed_{name})s ELSE {column} END"
        for name, column in ((name, _completed_column(name)) for name in completed)
    )
    run = f"FROM {table(Run)} WHERE id = %(run)s"
    return (
        f"UPDATE {table(Step)} SET transcript = %(transcript)s, prompt_tokens = prompt_tokens + %(prompt_tokens)s, "
        f"completion_tokens = completion_tokens + %(completion_tokens)s, {cases}, mailbox_closed_reason = "
        f"CASE WHEN {empty} AND mailbox_closed_reason = '' THEN %(closed_reason)s ELSE mailbox_closed_reason END "
        f"WHERE id = %(step)s RETURNING prompt_tokens, completion_tokens, turns, {unread}, "
        f"(SELECT status {run}), (SELECT coordinator_busy {run}), {schedule_flags('%(run)s', '%(step)s')}, "
        f"(SELECT workflow_id {run}), "
        f"(SELECT w.created FROM {table(Workflow)} w JOIN {table(Run)} r ON r.workflow_id = w.id WHERE r.id = %(run)s)"
    )
