"""The statements that record a step's last turn (runs/store/last_turn.py
says when each runs): ``write_last_turn``, the whole transaction in one
round trip on PostgreSQL (postgres_runs.py), and ``save_turn``, one
statement inside the turn's transaction on any database."""

from __future__ import annotations

import contextlib
import functools
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason
from runs.models import Run, Step, Workflow
from runs.store.sql.events import insert_events_from
from runs.store.sql.mailboxes import unread_count_of, unread_count_sql, unread_from
from runs.store.sql.rows import column_of, database, save_values, table
from runs.store.sql.schedule import (
    ScheduleState,
    ScheduleStatements,
    StepRow,
    prefilter_pending_may_start,
    schedule_flags,
    schedule_state_of,
    step_rows_document,
)
from runs.store.sql.steps import StepStatements, Successor


class LastTurn(NamedTuple):
    """A step's last turn, to write (``write_last_turn``): turn ``turn`` of
    ``step``, its ``transcript``, its ``tokens`` (prompt, completion) added
    to the step's, ``completed`` (field -> value, the status among them) and
    its ``events``. ``with_steps``: the run's step rows read back too, if a
    pending step may start. ``successor``: a step this completion is
    expected to start (the state machine's guess from the rows the worker
    read before): started and claimed in the same transaction, after the
    write, if start_and_claim_step's conditions hold then."""

    step: Step
    turn: int
    transcript: list
    tokens: tuple[int, int]
    completed: dict
    events: list[tuple[RuntimeEvent, datetime]]
    with_steps: bool = False
    successor: Successor | None = None


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


class TurnStatements(ScheduleStatements, StepStatements):
    def record_turn(self, step: Step, turn: int) -> int:
        """Record turn ``turn`` of ``step`` under the run's lock (taken in the
        same statement on PostgreSQL): how many rows it changed (0: the step
        no longer runs turn ``turn - 1``; another worker recorded it). Its
        lease and its queued mark go."""
        values = {"turns": turn, "lease_owner": "", "lease_expires": None, "turn_queued": None}
        where, params = "id = %s AND status = %s AND turns = %s", [step.pk, Step.Status.RUNNING, turn - 1]
        return self.update(Step, values, where, params, locking_run=step.run_id)

    def write_step(self, step_pk: int, values: dict) -> int:
        """Set ``values`` (field -> value) on step ``step_pk``: how many rows changed."""
        return self.update(Step, values, "id = %s", [step_pk])

    def save_turn_and_calls(
        self, step: Step, values: dict, tokens: tuple[int, int], calls: list
    ) -> tuple[int, int, int, int]:
        """Set ``values`` on ``step``, add ``tokens`` (prompt, completion) to
        its counts, and insert its turn's tool ``calls`` (new ToolCall rows,
        their ids set): the step's prompt and completion tokens and turns
        after it, and how many messages wait unread in its mailbox, read by
        the same statement. One round trip on PostgreSQL."""
        increments = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
        returning = ["prompt_tokens", "completion_tokens", "turns"]
        also = unread_count_sql(step.run_id, step.step_id)
        return self.update_returning(Step, step.pk, values, increments, returning, also, then_insert=calls)

    def write_last_turn(self, last: LastTurn, *, commit: bool = True) -> LastTurnWritten | None:
        """Record ``last`` (LastTurn), under the run's lock taken first:
        complete its step, close its mailbox as target-terminal unless closed
        already, store its events numbered after the run's last and read what
        scheduling needs (and, as ``last`` asks, the run's step rows; its
        successor started and claimed). None, having written nothing, if the
        step has unread mail or is no longer running the turn before.

        ``commit``: in a transaction of its own, committed on return
        (PostgreSQL: the whole transaction in one round trip); False: inside
        the caller's, which goes on holding the run's lock, for a completion
        whose successors are decided under that lock before it commits."""
        step = last.step
        with transaction.atomic() if commit else contextlib.nullcontext():
            self.lock_run(step.run_id)
            params = {
                **turn_params(last, last.transcript),
                "transcript": Step._meta.get_field("transcript").get_db_prep_save(last.transcript, database()),
            }
            if not self.update_rows(_last_turn_sql(tuple(last.completed)), params):
                return None
            if last.events:
                last_seq = self.insert_events(step.run_id, last.events)[-1]
            else:
                last_seq = self.fetch_all(*_last_seq(step.run_id))[0][0]
            schedule = self.schedule_state(step.run_id)
            assert schedule is not None  # the run's lock is held
            steps = self.step_rows(step.run_id) if last.with_steps and schedule.may_start else None
            successor = last.successor
            started = self.start_and_claim_step(step.run_id, successor) if successor is not None else None
        return LastTurnWritten(last_seq, schedule, steps, started)

    def save_turn(self, step: Step, transcript: list, tokens: tuple[int, int], completed: dict) -> TurnSaved:
        """Store a step's turn (``transcript``, ``tokens`` added: prompt,
        completion) and, if its mailbox holds nothing unread, complete the step
        with ``completed`` (field -> value) and close its mailbox as
        target-terminal (a closed mailbox keeps its reason): one statement."""
        params = {
            "transcript": Step._meta.get_field("transcript").get_db_prep_save(transcript, database()),
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            **completed_params(completed),
            "closed_reason": str(DropReason.TARGET_TERMINAL),
            "step": step.pk,
            "run": step.run_id,
            "mailbox": step.step_id,
            "coordinator": COORDINATOR,
        }
        rows = self.fetch_all(_save_sql(self.depends_on, tuple(completed)), params)
        if not rows:
            raise Step.DoesNotExist(f"step {step.pk} does not exist")
        prompt_tokens, completion_tokens, turns, unread, *state = rows[0]
        schedule = None if unread else schedule_state_of(*state)
        return TurnSaved(prompt_tokens, completion_tokens, turns, unread, schedule)


def turn_params(last: LastTurn, transcript) -> dict:
    """The parameters of a last turn's write (write_last_turn), ``transcript``
    as the database takes it."""
    step = last.step
    return {
        "turn": last.turn,
        "previous_turn": last.turn - 1,
        "transcript": transcript,
        "prompt_tokens": last.tokens[0],
        "completion_tokens": last.tokens[1],
        **completed_params(last.completed),
        "closed_reason": str(DropReason.TARGET_TERMINAL),
        "step": step.pk,
        "running": Step.Status.RUNNING,
        "run": step.run_id,
        "mailbox": step.step_id,
        "coordinator": COORDINATOR,
    }


def _last_seq(run_id: int) -> tuple[str, dict]:
    return f"SELECT last_event_seq FROM {table(Run)} WHERE id = %(run)s", {"run": run_id}


def completed_params(completed: dict) -> dict:
    return {f"completed_{name}": value for name, value in save_values(Step, completed).items()}


@functools.cache
def _completed_column(name: str) -> str:
    return database().ops.quote_name(column_of(Step, name))


def _step_written(completed: tuple[str, ...], transcript: str) -> str:
    """The UPDATE of a step's last turn (``transcript``: its parameter, cast
    as the database needs), where the step still runs the turn before and
    nothing waits unread in its mailbox."""
    sets = ", ".join(f"{_completed_column(name)} = %(completed_{name})s" for name in completed)
    return (
        f"UPDATE {table(Step)} SET turns = %(turn)s, lease_owner = '', lease_expires = NULL, "
        f"transcript = {transcript}, prompt_tokens = prompt_tokens + %(prompt_tokens)s, "
        f"completion_tokens = completion_tokens + %(completion_tokens)s, {sets}, mailbox_closed_reason = "
        "CASE WHEN mailbox_closed_reason = '' THEN %(closed_reason)s ELSE mailbox_closed_reason END "
        "WHERE id = %(step)s AND status = %(running)s AND turns = %(previous_turn)s "
        f"AND NOT EXISTS(SELECT 1 {unread_from('%(run)s', '%(mailbox)s')})"
    )


@functools.cache
def _last_turn_sql(completed: tuple[str, ...]) -> str:
    return _step_written(completed, "%(transcript)s")


@functools.cache
def write_sql(depends_on: tuple[str, str], completed: tuple[str, ...]) -> str:
    """PostgreSQL's statement of ``write_last_turn`` (postgres_runs.py)."""
    return (
        f"WITH done AS ({_step_written(completed, '%(transcript)s::jsonb')} "
        "RETURNING run_id), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s "
        "WHERE id = (SELECT run_id FROM done) RETURNING last_event_seq), "
        f"added AS ({insert_events_from('bumped')}) "
        # Read with the statement's snapshot, which holds neither write above:
        # the flags leave this step out, as done.
        # The steps are read only if one of them may start now.
        "SELECT bumped.last_event_seq, r.status, r.coordinator_busy, "
        f"{schedule_flags(depends_on, 'r.id', '%(step)s', may_start='pending.may_start')}, "
        "r.workflow_id, w.created, CASE WHEN %(with_steps)s AND pending.may_start "
        f"THEN {step_rows_document('r.id', '%(step)s', '%(completed_status)s')} END "
        f"FROM bumped, {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id, "
        f"LATERAL (SELECT {prefilter_pending_may_start(depends_on, 'r.id', '%(step)s')} AS may_start) pending "
        "WHERE r.id = %(run)s"
    )


@functools.cache
def _save_sql(depends_on: tuple[str, str], completed: tuple[str, ...]) -> str:
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
        f"(SELECT status {run}), (SELECT coordinator_busy {run}), {schedule_flags(depends_on, '%(run)s', '%(step)s')}, "
        f"(SELECT workflow_id {run}), "
        f"(SELECT w.created FROM {table(Workflow)} w JOIN {table(Run)} r ON r.workflow_id = w.id WHERE r.id = %(run)s)"
    )
