"""What a routed message writes: the run's message counter (read with the
mailbox states a turn routes to), a unit of work's messages stored and
counted, and one message with its coordinator wake request."""

from __future__ import annotations

import functools
from typing import NamedTuple

from django.db import connection

from agents.router import COORDINATOR, MailboxState
from runs.models import Message, Run, Step
from runs.store.sql.events import events_params, insert_events_from
from runs.store.sql.mailboxes import mailbox_state_of, unread_count_of
from runs.store.sql.pg_text import json_text
from runs.store.sql.rows import (
    in_order,
    plain_cursor,
    row_document,
    row_values,
    table,
)
from runs.store.sql.runs import (
    lock_run_sql,
    request_wake,
    request_wake_params,
    request_wake_sql,
    wake_params,
    wake_sql,
)
from runs.store.sql.writes import insert, json_rows


def insert_message(run_id: int, values: dict, *, wake: bool) -> bool | None:
    """Store one message row (``values``: field -> value) and, with
    ``wake``, count a coordinator wake request: whether no wake task need
    be queued (see wake_sql); None without ``wake``."""
    if not wake:
        insert(Message, **values)
        return None
    if connection.vendor != "postgresql":
        insert(Message, **values)
        return request_wake(run_id)
    # One round trip: the message and the coordinator's wake request.
    columns, row = row_values(Message, values)
    # The row's values named by position: every message row has the same
    # columns, so the statement's text is the same each time.
    named = {f"value{index}": value for index, value in enumerate(row)}
    with plain_cursor() as cursor:
        cursor.execute(
            f"WITH woken AS ({request_wake_sql()}) "
            f"INSERT INTO {table(Message)} ({columns}) "
            f"SELECT {', '.join(f'%({name})s' for name in named)} FROM woken RETURNING (SELECT busy FROM woken)",
            {**request_wake_params(run_id), **named},
        )
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return bool(row[0])


class Counted(NamedTuple):
    """The run's message counter, its status, and mailbox states read with them."""

    last_no: int
    status: str
    states: dict[str, MailboxState]


# States read with the counter: the coordinator's first, then the run's
# first steps. A small run's turn then reads no state of its own; a big
# run's reads each mailbox it routes to beyond these once.
STATES_WITH_COUNTER = 64


def read_counter(run_id: int) -> Counted:
    """The run's last message number and status, and the mailbox states of
    the coordinator and the run's first steps."""
    with plain_cursor() as cursor:
        cursor.execute(_counter_sql(), _counter_params(run_id))
        return _counted(run_id, cursor.fetchall())


def locked_counter(run_id: int) -> Counted:
    """Inside a transaction: take the run's lock, then read_counter once the
    lock is granted, so it sees what the lock's earlier holders committed
    (one statement would read with a snapshot taken before it waited). One
    round trip on PostgreSQL (rows.in_order)."""
    _, rows = in_order([(lock_run_sql(), {"run": run_id}), (_counter_sql(), _counter_params(run_id))])
    return _counted(run_id, rows)


def _counter_params(run_id: int) -> dict:
    return {"run": run_id, "coordinator": COORDINATOR, "limit": STATES_WITH_COUNTER}


def _counted(run_id: int, rows: list[tuple]) -> Counted:
    if not rows:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    states = {
        mailbox: mailbox_state_of(status, kind, reason, unread)
        for _, status, mailbox, kind, reason, unread in rows
        if mailbox is not None
    }
    return Counted(rows[0][0], rows[0][1], states)


@functools.cache
def _counter_sql() -> str:
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


def write_held(run_id: int, rows: list[dict], taken: int, wakes: int, events: list) -> Written:
    """Store a unit of work's message ``rows``, add ``taken`` to the run's
    message counter and ``wakes`` to its wake requests; on PostgreSQL its
    ``events`` too, all in one statement (elsewhere the caller writes them:
    last_seq is None)."""
    if connection.vendor == "postgresql":
        return Written(*_write_held_with_events(run_id, rows, taken, wakes, events))
    return Written(*_write_held(run_id, rows, taken, wakes), None)


def _write_held(run_id: int, rows: list[dict], taken: int, wakes: int) -> tuple[int, bool]:
    """Store ``rows``, add ``taken`` to the run's message counter and
    ``wakes`` to its wake requests; return the counter, as it is after it,
    and whether no wake task need be queued (a wake runs or is queued; see
    wake_sql) (SQLite)."""
    with plain_cursor() as cursor:
        cursor.execute(_count_sql(), _count_params(run_id, taken, 0, wakes))
        counted = cursor.fetchone()
        if counted is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        if rows:
            # Positional: row_values gives each row's values in column order.
            values = [row_values(Message, row) for row in rows]
            holes = ", ".join(["%s"] * len(values[0][1]))
            cursor.executemany(
                f"INSERT INTO {table(Message)} ({values[0][0]}) VALUES ({holes})", [params for _, params in values]
            )
    return counted[0], bool(counted[1])


def _write_held_with_events(
    run_id: int, rows: list[dict], taken: int, wakes: int, events: list
) -> tuple[int, bool, int]:
    """``_write_held`` in one round trip, with ``events`` (PostgreSQL): the
    messages and the events each one JSON document, inserted in the order
    they were routed and emitted. Also returns the last event seq."""
    params = {
        **_count_params(run_id, taken, len(events), wakes),
        "rows": json_text([row_document(Message, row) for row in rows]),
        **events_params(run_id, events),
    }
    with plain_cursor() as cursor:
        cursor.execute(_write_held_sql(), params)
        found = cursor.fetchone()
    if found is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return found[0], bool(found[1]), found[2]


@functools.cache
def _count_sql() -> str:
    marked, held_back = wake_sql("%(wakes)s")
    return (
        f"UPDATE {table(Run)} SET last_message_no = last_message_no + %(taken)s, "
        f"last_event_seq = last_event_seq + %(event_count)s, "
        f"wake_requests = wake_requests + %(wakes)s, {marked} WHERE id = %(run)s "
        f"RETURNING last_message_no, {held_back} AS busy, last_event_seq"
    )


def _count_params(run_id: int, taken: int, events: int, wakes: int) -> dict:
    return {"taken": taken, "event_count": events, "wakes": wakes, "run": run_id, **wake_params()}


@functools.cache
def _write_held_sql() -> str:
    columns, names, source = json_rows(Message, "m")
    return (
        f"WITH counted AS ({_count_sql()}), "
        f"stored AS (INSERT INTO {table(Message)} ({columns}) SELECT {names} FROM counted, {source} "
        "ORDER BY m.ordinality), "
        f"numbered AS ({insert_events_from('counted')}) "
        "SELECT last_message_no, busy, last_event_seq FROM counted"
    )
