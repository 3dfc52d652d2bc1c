"""Every raw SQL statement of the store, each named, and the only place
that asks which database it runs on (STYLE.md rule 15: dialect differences
at the edge).

Plain SQL where the ORM cannot say it (UPDATE ... RETURNING, a CTE that
locks the run first, JSON documents turned into rows, a pipelined
transaction) or took longer to build a query than the database to run it:
what runs on every step turn, routed message and event (about 1 ms a query
built by the ORM on a small VM, against 0.1-0.3 ms to run). Rows go in and
come out as the ORM would write and read them (runs/store/rows.py).
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason, MailboxState, MessageType, RouterMessage
from runs.models import Event, Message, Run, Step, Workflow
from runs.pg_text import json_text
from runs.store.rows import (
    database,
    db_value,
    from_db,
    insert_fields,
    instances,
    json_value,
    plain_cursor,
    row_document,
    row_values,
    select_columns,
    table,
)


def lock_run(run_id: int) -> None:
    """Take the run row's lock first in every transaction that changes a
    run's steps or mailboxes: the same order everywhere (run, then steps) so
    two writers never deadlock, and event numbers follow commit order."""
    with plain_cursor() as cursor:
        cursor.execute(lock_run_sql(), [run_id])


def lock_run_sql() -> str:
    lock = " FOR UPDATE" if database().features.has_select_for_update else ""
    return f"SELECT 1 FROM {table(Run)} WHERE id = %s{lock}"


def update(model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> int:
    """UPDATE rows of ``model``: set ``values`` (field name -> value) where
    ``where`` holds (SQL over column names, ``%s`` for each of ``params``).
    Returns how many rows changed: the conditional UPDATE that claims work.

    ``locking_run``: take that run's lock first (``lock_run``), in the same
    statement on PostgreSQL: one round trip fewer while the run is locked."""
    if locking_run is not None and database().vendor != "postgresql":
        lock_run(locking_run)
        locking_run = None
    statement, params = update_sql(model, values, where, params, locking_run=locking_run)
    with plain_cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount


def update_sql(model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> tuple[str, list]:
    """``update``'s statement and its parameters; ``locking_run`` on
    PostgreSQL only."""
    assignments, values_params = _assignments(model, values, {})
    if locking_run is None:
        return f"UPDATE {table(model)} SET {assignments} WHERE {where}", [*values_params, *params]
    # An uncorrelated EXISTS is evaluated once, before any row is read: the
    # run's lock is taken before the rows', as lock_run would. (A row
    # changed while this waited is checked again.)
    statement = (
        f"WITH locked AS ({lock_run_sql()}) "
        f"UPDATE {table(model)} SET {assignments} WHERE ({where}) AND EXISTS (SELECT 1 FROM locked)"
    )
    return statement, [locking_run, *values_params, *params]


def update_returning(
    model, pk: int, values: dict, increments: dict, returning: list[str], also: tuple[str, list] | None = None
) -> tuple:
    """One UPDATE of row ``pk``: set ``values``, add ``increments`` (field ->
    amount), and return the ``returning`` fields as they are after it. The
    ORM needs a second query to read F() results back. ``also``: one more
    SQL expression to return last (a subquery, say) and its parameters."""
    assignments, params = _assignments(model, values, increments)
    quote = database().ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
    extra, extra_params = also or ("", [])
    if extra:
        columns = f"{columns}, {extra}"
    with plain_cursor() as cursor:
        cursor.execute(
            f"UPDATE {table(model)} SET {assignments} WHERE id = %s RETURNING {columns}", [*params, pk, *extra_params]
        )
        row = cursor.fetchone()
    if row is None:
        raise model.DoesNotExist(f"{model.__name__} {pk} does not exist")
    return row


def _assignments(model, values: dict, increments: dict) -> tuple[str, list]:
    db = database()
    quote = db.ops.quote_name
    assignments, params = [], []
    for name, value in values.items():
        field = model._meta.get_field(name)
        assignments.append(f"{quote(field.column)} = %s")
        params.append(field.get_db_prep_save(value, db))
    for name, amount in increments.items():
        column = quote(model._meta.get_field(name).column)
        assignments.append(f"{column} = {column} + %s")
        params.append(amount)
    return ", ".join(assignments), params


def insert(model, **values) -> None:
    """One INSERT of a row of ``model`` (field name -> value), without the
    ORM's per-instance work: for the rows written per routed message."""
    columns, params = row_values(model, values)
    with plain_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(params))})",
            params,
        )


def insert_many(objs: list) -> None:
    """INSERT ``objs`` (new instances of one model, made by its constructor,
    so every default is filled in) in one statement, and set their primary
    keys, as bulk_create does. On PostgreSQL the rows travel as one JSON
    document that jsonb_populate_recordset turns into rows: bulk_create
    took about 0.1 ms a row to prepare and bind its thirty-odd parameters
    (60 ms for a 500-step fan-out, before its first step could start)."""
    if not objs:
        return
    model = type(objs[0])
    db = database()
    if db.vendor != "postgresql":
        model.objects.bulk_create(objs)
        return
    fields = insert_fields(model)
    rows = [{field.column: json_value(field, getattr(obj, field.attname)) for field in fields} for obj in objs]
    with plain_cursor() as cursor:
        cursor.execute(_insert_many_sql(model), [json_text(rows)])
        ids = [pk for (pk,) in cursor.fetchall()]
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = db.alias


@functools.cache
def _insert_many_sql(model) -> str:
    columns, names, source = json_rows(model, "r")
    # Rows go in, and their ids come back, in the document's order.
    return f"INSERT INTO {table(model)} ({columns}) SELECT {names} FROM {source} ORDER BY r.ordinality RETURNING id"


def json_rows(model, alias: str) -> tuple[str, str, str]:
    """For an INSERT ... SELECT of whole new rows of ``model`` sent as one
    JSON document (PostgreSQL; its parameter: ``json_text`` of a list of
    ``row_document``): the quoted columns, the same read from ``alias``,
    and the FROM item that turns the document into rows, numbered in its
    order as ``alias.ordinality``. A value too long for its column is
    refused as an INSERT refuses it, never cut."""
    quote = database().ops.quote_name
    fields = insert_fields(model)
    columns = ", ".join(quote(field.column) for field in fields)
    names = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    source = f"ROWS FROM (jsonb_populate_recordset(NULL::{table(model)}, %s::jsonb)) WITH ORDINALITY AS {alias}"
    return columns, names, source


# Big and not needed for a turn: the parsed spec is cached per version.
WORKFLOW_TEXT = ("spec", "yaml_text")


def step_for_turn(step_pk: int):
    """Step ``step_pk`` with its run, the run's workflow (but its text and
    stored spec) and the run's creator, as ``select_related`` would load
    them, or None; annotated, as ``annotate()`` would, with ``unread``: how
    many messages its mailbox holds unread (a turn with none skips reading
    them). One query, built once: the ORM took longer to build this join
    than PostgreSQL took to run it, on every step turn."""

    vendor = database().vendor
    parts = [(model, names) for model, names, _ in _step_for_turn_parts(vendor)]
    with plain_cursor() as cursor:
        cursor.execute(_step_for_turn_sql(vendor), [step_pk])
        row = cursor.fetchone()
    return None if row is None else _step_with_run(parts, row)


def claim_step_for_turn(step_pk: int, turn: int, owner: str, expires, now):
    """PostgreSQL: take the lease on turn ``turn`` of step ``step_pk`` (the
    step and its run running, the turn the next one, no live lease but
    ``owner``'s), clearing its queued mark (``Step.turn_queued``), and
    return the step loaded as ``step_for_turn`` loads it, in one statement;
    None if the turn is not this worker's to take. On a worker every turn
    paid a round trip to load the step and another to claim it."""
    vendor = database().vendor
    parts = [(model, names) for model, names, _ in _step_for_turn_parts(vendor)]
    step_model = parts[0][0]
    running = Step.Status.RUNNING
    with plain_cursor() as cursor:
        cursor.execute(
            _claim_step_for_turn_sql(vendor),
            [
                owner,
                db_value(step_model, "lease_expires", expires),
                step_pk,
                running,
                turn - 1,
                Run.Status.RUNNING,
                db_value(step_model, "lease_expires", now),
                owner,
            ],
        )
        row = cursor.fetchone()
    return None if row is None else _step_with_run(parts, row)


def _step_with_run(parts: list, row):
    (step, run, workflow, user), start = instances(parts, row)
    step.unread = row[start]
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    Run._meta.get_field("created_by").set_cached_value(run, user)
    Step._meta.get_field("run").set_cached_value(step, run)
    return step


@functools.cache
def _claim_step_for_turn_sql(vendor: str) -> str:
    columns, joins = _step_for_turn_columns(vendor)
    return (
        f"UPDATE {table(Step)} s SET lease_owner = %s, lease_expires = %s, turn_queued = NULL "
        f"FROM {table(Run)} r {joins} "
        "WHERE s.id = %s AND r.id = s.run_id AND s.status = %s AND s.turns = %s AND r.status = %s "
        "AND (s.lease_expires IS NULL OR s.lease_expires < %s OR s.lease_owner = %s) "
        f"RETURNING {columns}"
    )


@functools.cache
def _step_for_turn_parts(vendor: str) -> tuple:
    """(model, attnames, SELECT list) of the step, its run, workflow and creator."""
    user_model = Run._meta.get_field("created_by").related_model
    # Of the creator, a turn needs the username (injected into tool calls).
    kept = (user_model._meta.pk.name, user_model.USERNAME_FIELD)
    user_rest = tuple(f.name for f in user_model._meta.concrete_fields if f.name not in kept)
    aliased = ((Step, "s", ()), (Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", user_rest))
    return tuple((model, *select_columns(model, alias, vendor, without)) for model, alias, without in aliased)


@functools.cache
def _step_for_turn_sql(vendor: str) -> str:
    columns, joins = _step_for_turn_columns(vendor)
    return f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} WHERE s.id = %s"


def _step_for_turn_columns(vendor: str) -> tuple[str, str]:
    """What a step loaded for its turn selects (the step, its run, workflow
    and creator, then its unread count), and the joins from its run ``r``."""
    parts = _step_for_turn_parts(vendor)
    columns = ", ".join(select for _, _, select in parts) + ", " + unread_count_of("s.run_id", "s.step_id")
    return columns, run_joins(parts[3][0])


def run_joins(user_model) -> str:
    """The joins from a run ``r`` to its workflow ``w`` and creator ``u``."""
    return f"JOIN {table(Workflow)} w ON w.id = r.workflow_id LEFT JOIN {table(user_model)} u ON u.id = r.created_by_id"


_COUNTERS = {"last_event_seq", "last_message_no"}


def bump_counter(run_id: int, counter: str) -> int:
    # The UPDATE locks the run row until commit, so two writers never get the
    # same number, and a rolled-back transaction gives its number back.
    # RETURNING (PostgreSQL, SQLite >= 3.35) saves a second round trip.
    if counter not in _COUNTERS:
        raise ValueError(f"not a run counter: {counter!r}")
    table = connection.ops.quote_name(Run._meta.db_table)
    column = connection.ops.quote_name(counter)
    with plain_cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} + 1 WHERE id = %s RETURNING {column}", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return row[0]


def insert_events(run_id: int, events: list[tuple[RuntimeEvent, object]]) -> list[int]:
    """Number ``events`` (each with its creation time) with the run's next
    seqs and store them, in order; return their seqs."""
    if connection.vendor != "postgresql":
        seqs = []
        for values in _event_rows(run_id, events):
            seqs.append(bump_counter(run_id, "last_event_seq"))
            insert(Event, seq=seqs[-1], **values)
        return seqs
    # One round trip for them all: the counter's UPDATE (which locks the run
    # row, as _bump does) numbers the rows.
    count = len(events)
    with plain_cursor() as cursor:
        cursor.execute(_insert_events_sql(), [count, run_id, run_id, count, events_document(events)])
        seqs = sorted(seq for (seq,) in cursor.fetchall())
    if len(seqs) != count:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return seqs


def _event_rows(run_id: int, events: list[tuple[RuntimeEvent, object]]) -> list[dict]:
    return [
        {"run": run_id, "type": event.type, "step_id": event.step_id, "data": event.data, "created": created}
        for event, created in events
    ]


def events_document(events: list[tuple[RuntimeEvent, object]]) -> str:
    """The last parameter of ``insert_events_from``: ``events`` (each with
    its creation time) as one JSON document, in order (PostgreSQL)."""
    return json_text(
        [
            {"type": event.type, "step_id": event.step_id, "data": event.data, "created": created.isoformat()}
            for event, created in events
        ]
    )


# An event row's columns and how insert_events_from fills each.
_EVENT_COLUMNS = {"run": "%s", "type": "e.type", "step_id": "e.step_id", "data": "e.data", "created": "e.created"}


@functools.cache
def insert_events_from(counter: str) -> str:
    """An INSERT of events numbered after ``counter``.last_event_seq (a CTE
    that added their count to the run's counter and returned it), from one
    JSON document that jsonb_to_recordset turns into rows (PostgreSQL: psycopg
    dumped a typed array per column about four times slower); parameters:
    the run's id, the count, then ``events_document``."""
    fields = [f.name for f in Event._meta.concrete_fields if not f.primary_key and f.name != "seq"]
    if fields != list(_EVENT_COLUMNS):
        raise RuntimeError(f"runs/store/sql.py writes events as {list(_EVENT_COLUMNS)}; the model has {fields}")
    quote = connection.ops.quote_name
    columns = ", ".join(quote(Event._meta.get_field(name).column) for name in _EVENT_COLUMNS)
    seq = quote(Event._meta.get_field("seq").column)
    return (
        f"INSERT INTO {table(Event)} ({columns}, {seq}) "
        f"SELECT {', '.join(_EVENT_COLUMNS.values())}, {counter}.last_event_seq - %s + e.n "
        f"FROM {counter}, ROWS FROM (jsonb_to_recordset(%s::jsonb) "
        "AS (type text, step_id text, data jsonb, created timestamptz)) WITH ORDINALITY "
        f"AS e(type, step_id, data, created, n) RETURNING {seq}"
    )


@functools.cache
def _insert_events_sql() -> str:
    return (
        f"WITH bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %s WHERE id = %s "
        f"RETURNING last_event_seq) {insert_events_from('bumped')}"
    )


def schedule_state(run_id: int) -> ScheduleState | None:
    """For scheduling after a step ends, in one query: the run's status and
    coordinator_busy, whether the coordinator has unread mail, whether a step
    is pending, whether every step is done (terminal, none being resumed),
    and its workflow's id and created. None if the run does not exist."""
    with plain_cursor() as cursor:
        cursor.execute(_schedule_state_sql(), [COORDINATOR, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return schedule_state_of(*row)


class ScheduleState(NamedTuple):
    """What scheduling reads after a step ends (a tuple: scheduling unpacks it)."""

    status: str
    coordinator_busy: bool
    coordinator_has_mail: bool
    has_pending: bool
    all_done: bool
    workflow_id: int
    workflow_created: datetime


def schedule_state_of(status, busy, has_mail, has_pending, has_unfinished, workflow_id, created) -> ScheduleState:
    created = from_db(Workflow, "created", created)
    return ScheduleState(
        status, bool(busy), bool(has_mail), bool(has_pending), not has_unfinished, workflow_id, created
    )


def _quoted(*values: str) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def schedule_flags(run: str, other_than: str = "") -> str:
    """Whether the coordinator of run ``run`` (a column or %s) has unread
    mail, a step is pending, and a step other than ``other_than`` (a step's
    id column or %s; empty: none) is unfinished.

    The kinds and statuses are written in, not bound: a prepared statement's
    generic plan could not tell that its parameters match the partial
    indexes step_pending and step_unfinished (runs/models/runs.py), and would
    read every step of the run."""
    other = f" AND s.id <> {other_than}" if other_than else ""
    return (
        f"EXISTS(SELECT 1 {unread_from(run)}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} "
        f"AND s.kind = {_quoted(Step.Kind.STEP)} AND s.status = {_quoted(Step.Status.PENDING)}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} "
        f"AND (s.resuming OR s.status NOT IN ({_quoted(*Step.TERMINAL)})){other})"
    )


@functools.cache
def _schedule_state_sql() -> str:
    # Plain SQL: the ORM took ten times longer to build this than
    # PostgreSQL to run it, after every step of a run.
    return (
        f"SELECT r.status, r.coordinator_busy, {schedule_flags('r.id')}, "
        f"r.workflow_id, w.created FROM {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id "
        "WHERE r.id = %s"
    )


def mailbox_state_of(status: str, kind: str | None, reason: str | None, unread: int) -> MailboxState:
    """A MailboxState from the run's status, the step's kind and close
    reason (None: no such step) and its unread count, as read together."""
    return MailboxState(
        cancelled=status == Run.Status.CANCELLED,
        registered=kind == Step.Kind.STEP,
        closed_reason=DropReason(reason) if reason else None,
        unread=unread,
    )


@functools.cache
def _mailbox_state_sql() -> str:
    return (
        "SELECT r.status, s.kind, s.mailbox_closed_reason, "
        f"(SELECT COUNT(*) {unread_from('r.id')}) "
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id AND s.step_id = %s "
        "WHERE r.id = %s"
    )


def unread_from(run: str, mailbox: str = "%s") -> str:
    """The FROM and WHERE of a mailbox's unread messages (``m``), the one
    definition every query here uses: the run is ``run``, the mailbox
    ``mailbox`` (each a column, or %s for a parameter)."""
    return f"FROM {table(Message)} m WHERE {_unread_where(run, mailbox)}"


def _unread_where(run: str, mailbox: str = "%s") -> str:
    return f"m.run_id = {run} AND m.recipient = {mailbox} AND m.drained IS NULL AND m.drop_reason = ''"


# What a RouterMessage is made of, in _router_message's order.
_MESSAGE_COLUMNS = "m.message_id, m.sender, m.recipient, m.type, m.content, m.created"


def _router_message(message_id, sender, recipient, type_, content, created) -> RouterMessage:
    return RouterMessage(
        message_id=message_id,
        sender=sender,
        recipient=recipient,
        type=MessageType.parse(type_),
        content=content,
        created=from_db(Message, "created", created).timestamp(),
    )


def _returning(statement: str, params: list) -> list[tuple]:
    """The rows an UPDATE ... RETURNING (m.id first) gave, oldest message first."""
    with plain_cursor() as cursor:
        cursor.execute(statement, params)
        return sorted(cursor.fetchall())  # RETURNING has no order


@functools.cache
def _drop_unread_sql() -> str:
    # PostgreSQL: the unread messages dropped and returned in one statement.
    return (
        f"UPDATE {table(Message)} m SET drop_reason = %s WHERE {_unread_where('%s')} RETURNING m.id, {_MESSAGE_COLUMNS}"
    )


@functools.cache
def _close_and_drop_sql() -> str:
    # PostgreSQL: the step's mailbox closed with the given reason, or
    # workflow-cancelled if the run is cancelled, and only if this statement
    # closed it, its unread messages dropped with that reason and returned.
    return (
        f"WITH closed AS (UPDATE {table(Step)} s SET mailbox_closed_reason = "
        f"CASE WHEN (SELECT status FROM {table(Run)} WHERE id = s.run_id) = %s THEN %s ELSE %s END "
        "WHERE s.run_id = %s AND s.step_id = %s AND s.mailbox_closed_reason = '' "
        "RETURNING s.mailbox_closed_reason AS reason) "
        f"UPDATE {table(Message)} m SET drop_reason = closed.reason FROM closed WHERE {_unread_where('%s')} "
        f"RETURNING m.id, closed.reason, {_MESSAGE_COLUMNS}"
    )


@functools.cache
def _unread_sql() -> str:
    return f"SELECT {_MESSAGE_COLUMNS} {unread_from('%s')} ORDER BY m.id"


def unread_count_sql(run_id: int, mailbox: str) -> tuple[str, list]:
    """A subquery counting ``mailbox``'s unread messages, and its parameters:
    ``unread_count`` selects it; a statement that writes can return it too."""
    return unread_count_of("%s", "%s"), [run_id, mailbox]


def unread_count_of(run: str, mailbox: str) -> str:
    """A subquery counting the unread messages of mailbox ``mailbox`` of run
    ``run``, each a column or %s (step_for_turn selects it)."""
    return f"(SELECT COUNT(*) {unread_from(run, mailbox)})"


# A wake request queues a wake task only for an idle coordinator with none
# queued: every message a step sent to an idle coordinator queued one, and
# all but the first found nothing to do. The request that queues one marks
# the run (wake_queued); the wake that starts clears the mark, and so does a
# wake that finds another running (which reads what it was queued for) or a
# publish that failed. A mark older than a lease (ZENWEB_LEASE_SECONDS) is
# taken for a task the broker lost and holds nothing back.
def wake_sql(requests: str) -> tuple[str, str]:
    """For an UPDATE of the run row that adds ``requests`` (SQL) wake
    requests: the SET of the mark, and the RETURNING column that is true
    when no wake task need be queued (the coordinator busy, or a wake
    already queued). Parameters: ``wake_params()``'s first list for the SET
    (after ``requests``' own, when it is a %s), its second for the RETURNING."""
    marked = (
        f"wake_queued = CASE WHEN {requests} = 0 OR coordinator_busy OR wake_queued > %s THEN wake_queued ELSE %s END"
    )
    return marked, "coordinator_busy OR COALESCE(wake_queued <> %s, TRUE)"


def wake_params() -> tuple[list, list]:
    """The parameters of ``wake_sql``'s SET (when a mark stops counting, and
    now) and of its RETURNING (now)."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    now_value = db_value(Run, "wake_queued", now)
    return [db_value(Run, "wake_queued", stale), now_value], [now_value]


@functools.cache
def _wake_sql() -> str:
    marked, held_back = wake_sql("1")
    return (
        f"UPDATE {table(Run)} SET wake_requests = wake_requests + 1, {marked} "
        f"WHERE id = %s RETURNING {held_back} AS busy"
    )


def _wake_sql_params(run_id: int) -> list:
    marked, held_back = wake_params()
    return [*marked, run_id, *held_back]


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


def _counter_params(run_id: int) -> list:
    return [run_id, COORDINATOR, STATES_WITH_COUNTER]


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
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id WHERE r.id = %s "
        "ORDER BY s.step_id = %s DESC, s.position, s.id LIMIT %s"
    )


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
    messages = json_text([row_document(Message, row) for row in rows])
    event_params = [run_id, len(events), events_document(events)]
    with plain_cursor() as cursor:
        cursor.execute(_write_held_sql(), [*_count_params(run_id, taken, len(events), wakes), messages, *event_params])
        found = cursor.fetchone()
    if found is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return found[0], bool(found[1]), found[2]


@functools.cache
def _count_sql() -> str:
    marked, held_back = wake_sql("%s")
    return (
        f"UPDATE {table(Run)} SET last_message_no = last_message_no + %s, last_event_seq = last_event_seq + %s, "
        f"wake_requests = wake_requests + %s, {marked} WHERE id = %s "
        f"RETURNING last_message_no, {held_back} AS busy, last_event_seq"
    )


def _count_params(run_id: int, taken: int, events: int, wakes: int) -> list:
    marked, held_back = wake_params()
    return [taken, events, wakes, wakes, *marked, run_id, *held_back]


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


@functools.cache
def last_turn_write_sql(completed: tuple[str, ...]) -> str:
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


@functools.cache
def last_turn_save_sql(completed: tuple[str, ...]) -> str:
    quote = connection.ops.quote_name
    empty = f"{unread_count_of('%s', '%s')} = 0"
    cases = ", ".join(
        f"{column} = CASE WHEN {empty} THEN %s ELSE {column} END"
        for column in (quote(Step._meta.get_field(name).column) for name in completed)
    )
    run = f"FROM {table(Run)} WHERE id = %s"
    return (
        f"UPDATE {table(Step)} SET transcript = %s, prompt_tokens = prompt_tokens + %s, "
        f"completion_tokens = completion_tokens + %s, {cases}, mailbox_closed_reason = "
        f"CASE WHEN {empty} AND mailbox_closed_reason = '' THEN %s ELSE mailbox_closed_reason END "
        f"WHERE id = %s RETURNING prompt_tokens, completion_tokens, turns, {unread_count_of('%s', '%s')}, "
        f"(SELECT status {run}), (SELECT coordinator_busy {run}), {schedule_flags('%s', '%s')}, "
        f"(SELECT workflow_id {run}), "
        f"(SELECT w.created FROM {table(Workflow)} w JOIN {table(Run)} r ON r.workflow_id = w.id WHERE r.id = %s)"
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


def can_pipeline() -> bool:
    """Whether a transaction can be sent in one round trip here
    (``in_one_round_trip``): PostgreSQL, outside any transaction."""
    return connection.vendor == "postgresql" and not connection.in_atomic_block


def cancelled(run_id: int) -> bool:
    return Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).exists()


def mailbox_state(run_id: int, mailbox: str) -> MailboxState:
    """``mailbox``'s state, in one query instead of four: it runs for every
    routed message."""
    with plain_cursor() as cursor:
        cursor.execute(_mailbox_state_sql(), [mailbox, mailbox, run_id])
        row = cursor.fetchone()
    if row is None:
        return MailboxState(cancelled=False, registered=False, closed_reason=None, unread=0)
    return mailbox_state_of(*row)


def unread(run_id: int, mailbox: str) -> list[RouterMessage]:
    with plain_cursor() as cursor:
        cursor.execute(_unread_sql(), [run_id, mailbox])
        return [_router_message(*row) for row in cursor.fetchall()]


def unread_count(run_id: int, mailbox: str) -> int:
    with plain_cursor() as cursor:
        count, params = unread_count_sql(run_id, mailbox)
        cursor.execute(f"SELECT {count}", params)
        return cursor.fetchone()[0]


def close_mailbox(run_id: int, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
    """Close ``mailbox`` with ``reason`` (workflow-cancelled if the run is
    cancelled) unless it is closed, and if this closed it, drop what waits
    in it unread: the reason and the dropped messages. Under the run's lock."""
    if connection.vendor == "postgresql":
        # One statement: the reason (the run's status decides), the close,
        # and what it held dropped if this closed it.
        cancel = [Run.Status.CANCELLED, str(DropReason.WORKFLOW_CANCELLED), str(reason)]
        params = [*cancel, run_id, mailbox, run_id, mailbox]
        rows = _returning(_close_and_drop_sql(), params)
        return (DropReason(rows[0][1]) if rows else reason), [_router_message(*row[2:]) for row in rows]
    if cancelled(run_id):
        reason = DropReason.WORKFLOW_CANCELLED
    closed = Step.objects.filter(run_id=run_id, step_id=mailbox, mailbox_closed_reason="").update(
        mailbox_closed_reason=str(reason)
    )
    return reason, (drop_unread(run_id, mailbox, reason) if closed else [])


def drop_unread(run_id: int, mailbox: str, reason: DropReason) -> list[RouterMessage]:
    """Drop what waits unread in ``mailbox`` with ``reason``; the dropped."""
    if connection.vendor == "postgresql":
        rows = _returning(_drop_unread_sql(), [str(reason), run_id, mailbox])
        return [_router_message(*row[1:]) for row in rows]
    dropped = unread(run_id, mailbox)
    if dropped:
        Message.objects.filter(run_id=run_id, message_id__in=[m.message_id for m in dropped]).update(
            drop_reason=str(reason)
        )
    return dropped


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
    columns, params = row_values(Message, values)
    with plain_cursor() as cursor:
        cursor.execute(
            f"WITH woken AS ({_wake_sql()}) "
            f"INSERT INTO {table(Message)} ({columns}) "
            f"SELECT {', '.join(['%s'] * len(params))} FROM woken RETURNING (SELECT busy FROM woken)",
            [*_wake_sql_params(run_id), *params],
        )
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return bool(row[0])


def request_wake(run_id: int) -> bool:
    """Count a reason for the coordinator to wake: whether no wake task need
    be queued (see wake_sql)."""
    with plain_cursor() as cursor:
        cursor.execute(_wake_sql(), _wake_sql_params(run_id))
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return bool(row[0])


def start_pending_steps(pks: list[int], now) -> set[int]:
    """pending -> running for the steps ``pks``, their first turn marked
    queued at ``now`` (Step.turn_queued); the ids it changed. A step another
    scheduling pass started already is left alone: each starts once."""
    if not pks:
        return set()
    # Padded to a power of two with an id no row has: a statement's text is
    # prepared once per connection on PostgreSQL (rows.plain_cursor).
    size = 1 << (len(pks) - 1).bit_length()
    when = db_value(Step, "started", now)
    params = [Step.Status.RUNNING, when, when, *pks, *[0] * (size - len(pks)), Step.Status.PENDING]
    with plain_cursor() as cursor:
        cursor.execute(_start_pending_steps_sql(size), params)
        return {row[0] for row in cursor.fetchall()}


@functools.cache
def _start_pending_steps_sql(size: int) -> str:
    quote = database().ops.quote_name
    status, started, queued = (
        quote(Step._meta.get_field(name).column) for name in ("status", "started", "turn_queued")
    )
    return (
        f"UPDATE {table(Step)} SET {status} = %s, {started} = %s, {queued} = %s "
        f"WHERE id IN ({', '.join(['%s'] * size)}) AND {status} = %s RETURNING id"
    )
