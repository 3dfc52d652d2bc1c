"""A step's last turn: the one module that writes it.

Two ways, one outcome (the turn stored, the step completed with its output,
its mailbox closed as target-terminal unless closed already, and the run's
scheduling state read with that write):

- ``write``, for the usual last turn on PostgreSQL (an answer with text and
  no tool calls, no mail read, no repeat-until loop to decide; an empty
  answer is no last turn: the general path gives the model a hint or fails
  the step): the whole transaction sent at once (sql.in_one_round_trip):
  the run's lock, then one statement that records the turn, completes the
  step, closes its mailbox, stores the turn's events numbered after the
  run's last, and reads what scheduling needs. It writes nothing and
  returns None when mail reached the step while its model was answering,
  or when the turn is no longer this worker's (its lease ran out and
  another worker recorded it): the general path handles both.
- ``save``, the general path's (any database, inside the turn's
  transaction, under the run's lock): one statement that stores the turn
  and, if nothing waits unread, completes the step.

Why one round trip: every step turn records itself under its run's lock
(runs/store/sql/runs.py lock_run: event numbers follow commit order, and the last step
to end sees every other step done). Sent statement by statement, a turn
held that lock across four client round trips, and on a busy machine a
holder waiting for the CPU between two of them kept every other step of the
run waiting (pg_stat_activity: "idle in transaction"). The lock and the
write are two statements so that the second one's reads see what the
lock's earlier holders committed: a statement sees only what committed
before it started.
"""

from __future__ import annotations

from datetime import datetime

from django.db import connection

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason
from runs.models import Step
from runs.pg_text import json_text
from runs.store import rows, sql


def applies() -> bool:
    """Whether ``write`` can run here: PostgreSQL, outside any transaction
    (it commits its own)."""
    return sql.can_pipeline()


def write(
    step: Step,
    turn: int,
    transcript: list,
    tokens: tuple[int, int],
    completed: dict,
    events: list[tuple[RuntimeEvent, datetime]],
) -> tuple[int, sql.ScheduleState] | None:
    """Record turn ``turn`` of ``step`` as its last: store ``transcript``,
    add ``tokens`` (prompt, completion), set ``completed`` (field -> value),
    close its mailbox (a closed mailbox keeps its reason) and store
    ``events`` (each with its creation time), in one committed transaction.

    Returns the seq of the last event and the run's scheduling state as
    sql.schedule_state gives it, this step counted done; None, having
    written nothing, if the step has unread mail or is no longer running
    turn ``turn`` (its ``turns`` is not ``turn - 1``)."""
    db_values = [Step._meta.get_field(name).get_db_prep_save(value, connection) for name, value in completed.items()]
    # Documents go as JSON text, serialized here: psycopg would serialize
    # them between sending the lock and sending this statement, while the
    # lock is held (about 0.1 ms a turn).
    params = [
        turn,
        json_text(transcript),
        *tokens,
        *db_values,
        str(DropReason.TARGET_TERMINAL),
        step.pk,
        Step.Status.RUNNING,
        turn - 1,
        step.run_id,  # its unread mail
        step.step_id,
        len(events),  # bumped
        step.run_id,  # the events
        len(events),
        sql.events_document(events),
        COORDINATOR,  # the scheduling flags
        step.pk,
        step.run_id,
    ]
    statements = [(sql.lock_run_sql(), [step.run_id]), (sql.last_turn_write_sql(tuple(completed)), params)]
    row = rows.in_one_round_trip(statements)
    if row is None:
        return None
    last_seq, *state = row
    return last_seq, sql.schedule_state_of(*state)


def save(
    step: Step, transcript: list, tokens: tuple[int, int], completed: dict
) -> tuple[int, sql.ScheduleState | None]:
    """Store a step's turn (``transcript``, ``tokens`` added: prompt,
    completion) and, if its mailbox holds nothing unread, complete the step
    with ``completed`` (field -> value) and close its mailbox as
    target-terminal (a closed mailbox keeps its reason): one statement,
    under the run's lock the turn holds.

    Returns the unread count, and if the step completed, the run's
    scheduling state as schedule_state gives it, this step counted done.
    Everything that changes that state takes the run's lock, so nothing
    changes it before this commits: schedule() after commit need not read
    it again. Sets the step's transcript, token counts and turns."""
    db_value = [Step._meta.get_field(name).get_db_prep_save(value, connection) for name, value in completed.items()]
    mailbox = [step.run_id, step.step_id]
    run = step.run_id
    params = [
        Step._meta.get_field("transcript").get_db_prep_save(transcript, connection),
        *tokens,
        *(param for value in db_value for param in (*mailbox, value)),
        *mailbox,
        str(DropReason.TARGET_TERMINAL),
        step.pk,
        # RETURNING: the unread count, the run's status and coordinator_busy,
        # the scheduling flags, the workflow's id and created.
        *mailbox,
        run,
        run,
        run,
        COORDINATOR,
        run,
        run,
        step.pk,
        run,
        run,
    ]
    with rows.plain_cursor() as cursor:
        cursor.execute(sql.last_turn_save_sql(tuple(completed)), params)
        row = cursor.fetchone()
    if row is None:
        raise Step.DoesNotExist(f"step {step.pk} does not exist")
    step.transcript = transcript
    step.prompt_tokens, step.completion_tokens, step.turns, unread = row[:4]
    return unread, None if unread else sql.schedule_state_of(*row[4:])
