"""A turn's routed messages, held and written together (``messages_held``).

Routed one at a time, a message costs three round trips while the run is
locked: its number (the run's counter), its mailbox's state, its row. A
turn that forwards to ten steps paid thirty. Inside ``messages_held`` the
run's lock is already taken, so nobody else can number, store or drain
this run's messages until commit, and the store can keep what it read:

- the counter is read once (with the coordinator's mailbox state, the
  mailbox every step sends to) and numbers are handed out in memory;
- a mailbox's state is read once and then kept, its unread count moved by
  the messages this block stores for it;
- the rows wait in memory and are written in one statement with the
  counter's new value and the coordinator's wake request when the block
  ends, or before anything reads messages through the store (a drain, a
  close, an unread count), which also forgets the kept states.

On PostgreSQL that statement also writes the run's events held so far
(events_held), numbered as they were emitted. So a turn's messages cost
two round trips however many there are, and one of them is its events'.
Nothing is written if the block raises; ``held_savepoint`` (runs/stores.py)
forgets what a rolled-back savepoint held.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from django.db import connection, transaction

from agents.router import COORDINATOR, MailboxState
from runs.models import Message, Run, Step
from runs.pg_text import json_text
from runs.sql import json_rows, lock_run, plain_cursor, row_document, row_values, table


@dataclass
class HeldMessages:
    """What one block holds for one run."""

    run_id: int
    # The run's last message number as this block has handed it out (None
    # until the first message of the block is numbered).
    last_no: int | None = None
    taken: int = 0
    rows: list[dict] = field(default_factory=list)
    wakes: int = 0
    # Mailbox states read in this block, kept up to date with its rows.
    # Only registered steps and the coordinator are kept: a name that is
    # not a step yet may become one in this block (spawn_worker).
    states: dict[str, MailboxState] = field(default_factory=dict)

    def mark(self) -> tuple:
        return self.last_no, self.taken, list(self.rows), self.wakes

    def roll_back_to(self, mark: tuple) -> None:
        """Hold again what was held at ``mark`` (a savepoint rolled back):
        rows it held, and numbers it took, are forgotten (the next message
        takes the number again), and rows written since (a flush inside
        the savepoint, which the rollback undid) are held again."""
        self.last_no, self.taken, rows, self.wakes = mark
        self.rows = list(rows)
        self.states.clear()

    def held_for(self, mailbox: str) -> int:
        """Messages held for ``mailbox`` that wait in it unread."""
        return sum(1 for row in self.rows if row["recipient"] == mailbox and not row["drop_reason"])


# Messages of runs whose writing is held, per thread: like events_held,
# every store of the run in this thread shares them.
_held = threading.local()


def held(run_id: int) -> HeldMessages | None:
    return _held.__dict__.get("runs", {}).get(run_id)


# What the counter's read gives: the run's last message number, its status,
# and the mailbox states read with it.
Counted = tuple[int, str, dict[str, MailboxState]]


@contextlib.contextmanager
def messages_held(run_id: int, *, lock: bool = False) -> Iterator[str | None]:
    """Hold the messages routed for run ``run_id`` in this block and write
    them together when it ends (see the module's docstring).

    Use inside the transaction that holds the run's lock, around routing
    that reads messages only through DjangoMailboxStore (a turn's tool
    calls): a query of its own would not see the held rows. ``lock``: take
    the run's lock here (sql.lock_run) and read the counter after it, for a
    block that will route: a coordinator's forwards. Gives the run's status
    where this block read it, else None."""
    runs: dict[int, HeldMessages] = _held.__dict__.setdefault("runs", {})
    if run_id in runs:  # an outer block writes them
        if lock:
            lock_run(run_id)
        yield None
        return
    block = HeldMessages(run_id)
    status = None
    if lock:
        # Two statements: the counter's read sees what the lock's earlier
        # holders committed (one statement would read with a snapshot taken
        # before it waited for the lock).
        lock_run(run_id)
        block.last_no, status, block.states = _read_counter(run_id)
    runs[run_id] = block
    try:
        yield status
        if not transaction.get_rollback():  # no queries in a doomed transaction
            flush(runs[run_id])
    finally:
        runs.pop(run_id, None)


def next_number(block: HeldMessages) -> int:
    if block.last_no is None:
        block.last_no, _, states = _read_counter(block.run_id)
        for mailbox, state in states.items():
            block.states.setdefault(mailbox, state)
    block.last_no += 1
    block.taken += 1
    return block.last_no


def keep_state(block: HeldMessages, mailbox: str, state: MailboxState) -> MailboxState:
    """``state`` as read from the database, plus what this block holds for
    ``mailbox``; kept for the rest of the block if ``mailbox`` is a step or
    the coordinator."""
    state = replace(state, unread=state.unread + block.held_for(mailbox))
    if state.registered or mailbox == COORDINATOR:
        block.states[mailbox] = state
    return state


def hold(block: HeldMessages, values: dict, *, wake: bool) -> None:
    block.rows.append(values)
    recipient = values["recipient"]
    if wake:
        block.wakes += 1
    kept = block.states.get(recipient)
    if kept is not None and not values["drop_reason"]:
        block.states[recipient] = replace(kept, unread=kept.unread + 1)


def flush(block: HeldMessages) -> None:
    """Write what ``block`` holds: its rows, the run's counter, the
    coordinator's wake request, and on PostgreSQL the run's events held so
    far (events_held), all in one statement. The block then reads states
    afresh."""
    from runs import stores  # stores import this module

    block.states.clear()
    if not block.taken and not block.rows:
        return
    rows, taken, wakes = block.rows, block.taken, block.wakes
    block.rows, block.taken, block.wakes = [], 0, 0
    if connection.vendor == "postgresql":
        events = stores.take_held_events(block.run_id)
        last_no, busy, last_seq = _write_with_events(block.run_id, rows, taken, wakes, events)
        if events:
            stores.broadcast_after_commit(block.run_id, last_seq)
    else:
        last_no, busy = _write(block.run_id, rows, taken, wakes)
    if last_no != block.last_no:
        # The counter moved under the run's lock: something numbered a
        # message of this run without the block. Never commit that.
        raise RuntimeError(
            f"run {block.run_id}: message numbers out of step (held up to {block.last_no}, stored {last_no})"
        )
    if wakes:
        stores.wake_after_commit(block.run_id, busy=busy)


# States read with the counter: the coordinator's first, then the run's
# first steps. A small run's turn then reads no state of its own; a big
# run's reads each mailbox it routes to beyond these once.
STATES_WITH_COUNTER = 64


def _read_counter(run_id: int) -> Counted:
    """The run's last message number and status, and the mailbox states of
    the coordinator and the run's first steps."""
    with plain_cursor() as cursor:
        cursor.execute(_counter_sql(), _counter_params(run_id))
        return _counted(run_id, cursor.fetchall())


def _counter_params(run_id: int) -> list:
    return [run_id, COORDINATOR, STATES_WITH_COUNTER]


def _counted(run_id: int, rows: list[tuple]) -> Counted:
    if not rows:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    from runs.stores import mailbox_state_of

    states = {
        mailbox: mailbox_state_of(status, kind, reason, unread)
        for _, status, mailbox, kind, reason, unread in rows
        if mailbox is not None
    }
    return rows[0][0], rows[0][1], states


@functools.cache
def _counter_sql() -> str:
    from runs.stores import unread_count_of

    return (
        "SELECT r.last_message_no, r.status, s.step_id, s.kind, s.mailbox_closed_reason, "
        f"{unread_count_of('r.id', 's.step_id')} "
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id WHERE r.id = %s "
        "ORDER BY s.step_id = %s DESC, s.position, s.id LIMIT %s"
    )


def _write(run_id: int, rows: list[dict], taken: int, wakes: int) -> tuple[int, bool]:
    """Store ``rows``, add ``taken`` to the run's message counter and
    ``wakes`` to its wake requests; return the counter, as it is after it,
    and whether no wake task need be queued (a wake runs or is queued; see
    stores.wake_sql) (SQLite)."""
    with plain_cursor() as cursor:
        cursor.execute(_count_sql(), _count_params(run_id, taken, 0, wakes))
        counted = cursor.fetchone()
        if counted is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        if rows:
            values = [row_values(Message, row) for row in rows]
            holes = ", ".join(["%s"] * len(values[0][1]))
            cursor.executemany(
                f"INSERT INTO {table(Message)} ({values[0][0]}) VALUES ({holes})", [params for _, params in values]
            )
    return counted[0], bool(counted[1])


def _write_with_events(run_id: int, rows: list[dict], taken: int, wakes: int, events: list) -> tuple[int, bool, int]:
    """``_write`` in one round trip, with ``events`` (PostgreSQL): the
    messages and the events each one JSON document, inserted in the order
    they were routed and emitted. Also returns the last event seq."""
    from runs.stores import events_document

    messages = json_text([row_document(Message, row) for row in rows])
    event_params = [run_id, len(events), events_document(events)]
    with plain_cursor() as cursor:
        cursor.execute(_write_sql(), [*_count_params(run_id, taken, len(events), wakes), messages, *event_params])
        found = cursor.fetchone()
    if found is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return found[0], bool(found[1]), found[2]


@functools.cache
def _count_sql() -> str:
    from runs.stores import wake_sql

    marked, held_back = wake_sql("%s")
    return (
        f"UPDATE {table(Run)} SET last_message_no = last_message_no + %s, last_event_seq = last_event_seq + %s, "
        f"wake_requests = wake_requests + %s, {marked} WHERE id = %s "
        f"RETURNING last_message_no, {held_back} AS busy, last_event_seq"
    )


def _count_params(run_id: int, taken: int, events: int, wakes: int) -> list:
    from runs.stores import wake_params

    marked, held_back = wake_params()
    return [taken, events, wakes, wakes, *marked, run_id, *held_back]


@functools.cache
def _write_sql() -> str:
    from runs.stores import insert_events_from

    columns, names, source = json_rows(Message, "m")
    return (
        f"WITH counted AS ({_count_sql()}), "
        f"stored AS (INSERT INTO {table(Message)} ({columns}) SELECT {names} FROM counted, {source} "
        "ORDER BY m.ordinality), "
        f"numbered AS ({insert_events_from('counted')}) "
        "SELECT last_message_no, busy, last_event_seq FROM counted"
    )
