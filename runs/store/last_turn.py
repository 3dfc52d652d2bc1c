"""A step's last turn: the one module that writes it.

Two ways, one outcome (the turn stored, the step completed with its output,
its mailbox closed as target-terminal unless closed already, and the run's
scheduling state read with that write):

- ``write``, for the usual last turn (an answer with text and no tool
  calls, no mail read, no repeat-until loop to decide; an empty answer is
  no last turn: the general path gives the model a hint or fails the step),
  on every database: the run's lock, then what records the turn, completes
  the step, closes its mailbox, stores the turn's events numbered after the
  run's last, and reads what scheduling needs. On PostgreSQL that is one
  statement after the lock, the whole transaction sent at once (the store's
  in_one_round_trip); elsewhere the store sends it statement by statement. It writes nothing and
  returns None when mail reached the step while its model was answering,
  or when the turn is no longer this worker's (its lease ran out and
  another worker recorded it): the general path handles both.
- ``save``, the general path's (any database, inside the turn's
  transaction, under the run's lock): one statement that stores the turn
  and, if nothing waits unread, completes the step. When mail did wait and
  the step may not take another turn to read it (past its wake cycles or
  its hold timeout: the mail is dropped), ``complete`` completes it in the
  same transaction.

Why one round trip: every step turn records itself under its run's lock
(the store's lock_run: event numbers follow commit order, and the last step
to end sees every other step done). Sent statement by statement, a turn
held that lock across four client round trips, and on a busy machine a
holder waiting for the CPU between two of them kept every other step of the
run waiting (pg_stat_activity: "idle in transaction"). The lock and the
write are two statements so that the second one's reads see what the
lock's earlier holders committed: a statement sees only what committed
before it started. The lock is still held while this process sends the
write (the store's in_one_round_trip), and completions of one run's steps still
wait for each other's commits: docs/concurrency.md, "The run's lock".
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from agents.events import Event as RuntimeEvent
from runs.models import Step
from runs.store.sql import LastTurn, LastTurnWritten, ScheduleState, store


def write(
    step: Step,
    turn: int,
    transcript: list,
    tokens: tuple[int, int],
    completed: dict,
    events: list[tuple[RuntimeEvent, datetime]],
    **options,
) -> LastTurnWritten | None:
    """Record turn ``turn`` of ``step`` as its last (``transcript``,
    ``tokens``: prompt, completion), completed with ``completed`` (field ->
    value, the status among them), with its ``events``: see the store's
    ``write_last_turn`` and ``LastTurn`` (``options``: with_steps,
    successor; and commit)."""
    commit = options.pop("commit", True)
    return store().write_last_turn(
        LastTurn(step, turn, transcript, tokens, completed, events, **options), commit=commit
    )


def save(step: Step, transcript: list, tokens: tuple[int, int], completed: dict) -> tuple[int, ScheduleState | None]:
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
    saved = store().save_turn(step, transcript, tokens, completed)
    step.transcript = transcript
    step.prompt_tokens, step.completion_tokens, step.turns = saved.prompt_tokens, saved.completion_tokens, saved.turns
    return saved.unread, saved.schedule


def complete(step: Step, output: str) -> None:
    """Complete ``step`` with ``output``, its last turn stored by ``save``
    with mail unread, which was dropped since (its mailbox closed by the
    router): in the turn's transaction, under the run's lock."""
    store().write_step(step.pk, completion(output))


def completion(output: str) -> dict:
    """The fields of a step that completed with ``output``."""
    return {"status": Step.Status.COMPLETED, "output": output, "finished": timezone.now()}
