"""A step's usual last turn, written in one round trip on PostgreSQL.

Every step turn records itself under its run's lock (runs/sql.py lock_run:
event numbers follow commit order, and the last step to end sees every
other step done). Sent statement by statement, a turn held that lock across
four client round trips, and on a busy machine a holder waiting for the CPU
between two of them kept every other step of the run waiting: in the
orchestration bench the lock was held nearly all the time, mostly by
processes waiting to be scheduled (pg_stat_activity: "idle in transaction").

For the usual last turn (an answer with text and no tool calls, no mail
read, no repeat-until loop to decide; an empty answer is no last turn: the
general path gives the model a hint or fails the step), ``write`` sends the whole transaction at once
(sql.in_one_round_trip): the run's lock, then one statement that records
the turn, completes the step, closes its mailbox, stores the turn's events
numbered after the run's last, and reads what scheduling needs. The lock
and that statement are two statements so that the second one's reads see
what the lock's earlier holders committed: a statement sees only what
committed before it started.

It writes nothing and returns None when mail reached the step while its
model was answering, or when the turn is no longer this worker's (its lease
ran out and another worker recorded it): the general path in
runs/actions/steps.py handles both.
"""

from __future__ import annotations

import functools
from datetime import datetime

from django.db import connection

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason
from runs import sql
from runs.models import Run, Step, Workflow
from runs.pg_text import json_text
from runs.sql import table
from runs.stores import events_document, insert_events_from, schedule_flags, schedule_state_of, unread_from


def applies() -> bool:
    """Whether ``write`` can run here: PostgreSQL, outside any transaction
    (it commits its own)."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def write(
    step: Step,
    turn: int,
    transcript: list,
    tokens: tuple[int, int],
    completed: dict,
    events: list[tuple[RuntimeEvent, datetime]],
) -> tuple[int, tuple] | None:
    """Record turn ``turn`` of ``step`` as its last: store ``transcript``,
    add ``tokens`` (prompt, completion), set ``completed`` (field -> value),
    close its mailbox (a closed mailbox keeps its reason) and store
    ``events`` (each with its creation time), in one committed transaction.

    Returns the seq of the last event and the run's scheduling state as
    stores.schedule_state gives it, this step counted done; None, having
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
        events_document(events),
        COORDINATOR,  # the scheduling flags
        step.pk,
        step.run_id,
    ]
    row = sql.in_one_round_trip([(sql.lock_run_sql(), [step.run_id]), (_write_sql(tuple(completed)), params)])
    if row is None:
        return None
    last_seq, *state = row
    return last_seq, schedule_state_of(*state)


@functools.cache
def _write_sql(completed: tuple[str, ...]) -> str:
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(Step._meta.get_field(name).column)} = %s" for name in completed)
    return (
        f"WITH done AS (UPDATE {table(Step)} SET turns = %s, lease_owner = '', lease_expires = NULL, "
        f"transcript = %s::jsonb, prompt_tokens = prompt_tokens + %s, completion_tokens = completion_tokens + %s, "
        f"{sets}, mailbox_closed_reason = "
        "CASE WHEN mailbox_closed_reason = '' THEN %s ELSE mailbox_closed_reason END "
        f"WHERE id = %s AND status = %s AND turns = %s AND NOT EXISTS(SELECT 1 {unread_from('%s', '%s')}) "
        "RETURNING run_id), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %s "
        "WHERE id = (SELECT run_id FROM done) RETURNING last_event_seq), "
        f"added AS ({insert_events_from('bumped')}) "
        # Read with the statement's snapshot, which holds neither write above:
        # the flags leave this step out, as done.
        f"SELECT bumped.last_event_seq, r.status, r.coordinator_busy, {schedule_flags('r.id', '%s')}, "
        f"r.workflow_id, w.created FROM bumped, {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id "
        "WHERE r.id = %s"
    )
