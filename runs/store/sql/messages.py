"""What a routed message writes: the run's message counter (read with the
mailbox states a turn routes to), a unit of work's messages stored and
counted, and one message with its coordinator wake request."""

from __future__ import annotations

import functools
from typing import NamedTuple

from agents.router import COORDINATOR, MailboxState
from runs.models import Message, Run, Step
from runs.store.sql.events import EventStatements, insert_events_from
from runs.store.sql.mailboxes import MailboxStatements, mailbox_state_of, unread_count_of
from runs.store.sql.rows import row_values, table
from runs.store.sql.runs import lock_run_sql, wake_params, wake_sql
from runs.store.sql.writes import json_rows


class Counted(NamedTuple):
    """The run's message counter, its status, and mailbox states read with them."""

    last_no: int
    status: str
    states: dict[str, MailboxState]


# States read with the counter: the coordinator's first, then the run's
# first steps. A small run's turn then reads no state of its own; a big
# run's reads each mailbox it routes to beyond these once.
STATES_WITH_COUNTER = 64


class MessageStatements(EventStatements, MailboxStatements):
    def insert_message(self, run_id: int, values: dict, *, wake: bool) -> bool | None:
        """Store one message row (``values``: field -> value) and, with
        ``wake``, count a coordinator wake request: whether no wake task need
        be queued (see wake_sql); None without ``wake`` (one round trip for
        both on PostgreSQL)."""
        self.insert(Message, **values)
        return self.request_wake(run_id) if wake else None

    def read_counter(self, run_id: int) -> Counted:
        """The run's last message number and status, and the mailbox states of
        the coordinator and the run's first steps."""
        return counted(run_id, self.fetch_all(counter_sql(), counter_params(run_id)))

    def locked_counter(self, run_id: int) -> Counted:
        """Inside a transaction: take the run's lock, then read_counter once the
        lock is granted, so it sees what the lock's earlier holders committed
        (one statement would read with a snapshot taken before it waited). One
        round trip on PostgreSQL (``in_order``)."""
        _, rows = self.in_order([(lock_run_sql(), {"run": run_id}), (counter_sql(), counter_params(run_id))])
        return counted(run_id, rows)

    def write_held(self, run_id: int, rows: list[dict], taken: int, wakes: int, events: list) -> Written:
        """Store a unit of work's message ``rows``, add ``taken`` to the run's
        message counter and ``wakes`` to its wake requests; return the counter,
        as it is after it, and whether no wake task need be queued (a wake runs
        or is queued; see wake_sql). On PostgreSQL its ``events`` too, all in
        one statement (elsewhere the caller writes them: last_seq is None)."""
        with self.cursor() as cursor:
            cursor.execute(count_sql(), count_params(run_id, taken, 0, wakes))
            found = cursor.fetchone()
            if found is None:
                raise Run.DoesNotExist(f"run {run_id} does not exist")
            if rows:
                # Positional: row_values gives each row's values in column order.
                values = [row_values(Message, row) for row in rows]
                holes = ", ".join(["%s"] * len(values[0][1]))
                cursor.executemany(
                    f"INSERT INTO {table(Message)} ({values[0][0]}) VALUES ({holes})", [params for _, params in values]
                )
        return Written(found[0], bool(found[1]), None)


def counter_params(run_id: int) -> dict:
    return {"run": run_id, "coordinator": COORDINATOR, "limit": STATES_WITH_COUNTER}


def counted(run_id: int, rows: list[tuple]) -> Counted:
    if not rows:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    states = {
        mailbox: mailbox_state_of(status, kind, reason, unread)
        for _, status, mailbox, kind, reason, unread in rows
        if mailbox is not None
    }
    return Counted(rows[0][0], rows[0][1], states)


@functools.cache
def counter_sql() -> str:
    return (
        "SELECT r.last_message_no, r.status, s.step_id, s.kind, s.mailbox_closed_reason, "
        f"{unread_count_of('r.id', 's.step_id')} "
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id WHERE r.id = %(run)s "
        "ORDER BY s.step_id = %(coordinator)s DESC, s.position, s.id LIMIT %(limit)s"
    )


class Written(NamedTuple):
    """What writing a unit of work's messages gives back."""

    last_no: int  # the run's message counter after it
    busy: bool  # no wake task need be queued (see wake_sql)
    last_seq: int | None  # the last event seq, when its events went with it (PostgreSQL)


@functools.cache
def count_sql() -> str:
    marked, held_back = wake_sql("%(wakes)s")
    return (
        f"UPDATE {table(Run)} SET last_message_no = last_message_no + %(taken)s, "
        f"last_event_seq = last_event_seq + %(event_count)s, "
        f"wake_requests = wake_requests + %(wakes)s, {marked} WHERE id = %(run)s "
        f"RETURNING last_message_no, {held_back} AS busy, last_event_seq"
    )


def count_params(run_id: int, taken: int, events: int, wakes: int) -> dict:
    return {"taken": taken, "event_count": events, "wakes": wakes, "run": run_id, **wake_params()}


@functools.cache
def write_held_sql() -> str:
    columns, names, source = json_rows(Message, "m")
    return (
        f"WITH counted AS ({count_sql()}), "
        f"stored AS (INSERT INTO {table(Message)} ({columns}) SELECT {names} FROM counted, {source} "
        "ORDER BY m.ordinality), "
        f"numbered AS ({insert_events_from('counted')}) "
        "SELECT last_message_no, busy, last_event_seq FROM counted"
    )
