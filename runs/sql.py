"""Plain SQL for the statements that run on every step turn, routed message
and event: the ORM spends longer building these than the database spends
running them (about 1 ms a query on a small VM, against 0.1-0.3 ms).

Each helper writes or reads rows exactly as the ORM would: every field's
default filled in, every value converted on the way in and out. Column
names in the callers' WHERE clauses are the fields' names (no model here
sets ``db_column``).
"""

from __future__ import annotations

import datetime
import functools
import time

from django.db import DEFAULT_DB_ALIAS, connections

from runs.pg_text import json_text


def _db():
    # One lookup per call: every attribute of django.db.connection goes
    # through an asgiref Local, which a hot path pays for dozens of times.
    return connections[DEFAULT_DB_ALIAS]


def plain_cursor():
    """A cursor for this module's fixed statements, run per routed message,
    event and step turn. On PostgreSQL it binds parameters on the server and
    prepares each statement on its first use on a connection: planned once,
    not every time (about a third off each). Django's own queries keep
    client-side binding and no preparing (some ORM queries need the one,
    connection poolers the other: see README on PgBouncer)."""
    db = _db()
    if db.vendor != "postgresql":
        return db.cursor()
    db.ensure_connection()
    db.validate_thread_sharing()
    cursor = _prepared_cursor_class()(db.connection)
    return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)


@functools.cache
def _prepared_cursor_class():
    import psycopg

    class PreparedCursor(psycopg.Cursor):
        """psycopg's server-binding cursor, each statement prepared on its
        first use on a connection (psycopg's public ``prepare=True``)."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True, binary=binary)

    return PreparedCursor


def in_one_round_trip(statements: list[tuple[str, list]]) -> tuple | None:
    """Run ``statements`` (SQL, parameters) as one transaction sent at once,
    in PostgreSQL's pipeline mode (psycopg's public ``pipeline()``): the
    server runs them back to back and commits, so a lock the first takes is
    never held while this process waits for the CPU or the network. Returns
    the first row of the last one (None if it has none). Each statement
    still sees what committed before it started.

    Outside any transaction.atomic() block only: it begins and commits its
    own transaction."""
    db = _db()
    if db.vendor != "postgresql" or db.in_atomic_block:
        raise RuntimeError("a pipeline of statements here needs PostgreSQL and no open transaction")
    db.ensure_connection()
    db.validate_thread_sharing()
    cursor_class = _prepared_cursor_class()
    cursors = [db.make_cursor(cursor_class(db.connection)) for _ in statements]
    started = time.monotonic()
    # No BEGIN or COMMIT: in autocommit, the statements a pipeline sends
    # before its Sync are one implicit transaction, committed at the Sync
    # (rolled back, and raised here, if one fails). psycopg's transaction()
    # would sync after BEGIN and again before COMMIT: three round trips.
    with db.wrap_database_errors, db.connection.pipeline():
        for cursor, (statement, params) in zip(cursors, statements, strict=True):
            cursor.execute(statement, params)
    if db.queries_logged:
        # Django's debug cursor cannot read a pipelined statement back: log
        # each one's text (with its placeholders) and their time together.
        spent = f"{time.monotonic() - started:.3f}"
        db.queries_log.extend({"sql": statement, "time": spent} for statement, _ in statements)
    return cursors[-1].fetchone()


def table(model) -> str:
    return _db().ops.quote_name(model._meta.db_table)


def db_value(model, name: str, value):
    """``value`` for field ``name`` as the database takes it (a datetime as
    SQLite's text, for instance): for the parameters of a WHERE clause."""
    return model._meta.get_field(name).get_db_prep_value(value, _db())


def json_rows(model, alias: str) -> tuple[str, str, str]:
    """For an INSERT ... SELECT of whole new rows of ``model`` sent as one
    JSON document (PostgreSQL; its parameter: ``json_text`` of a list of
    ``row_document``): the quoted columns, the same read from ``alias``,
    and the FROM item that turns the document into rows, numbered in its
    order as ``alias.ordinality``. A value too long for its column is
    refused as an INSERT refuses it, never cut."""
    quote = _db().ops.quote_name
    fields = _insert_fields(model)
    columns = ", ".join(quote(field.column) for field in fields)
    names = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    source = f"ROWS FROM (jsonb_populate_recordset(NULL::{table(model)}, %s::jsonb)) WITH ORDINALITY AS {alias}"
    return columns, names, source


def insert(model, **values) -> None:
    """One INSERT of a row of ``model`` (field name -> value), without the
    ORM's per-instance work: for the rows written per routed message."""
    columns, params = row_values(model, values)
    with plain_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(params))})",
            params,
        )


def lock_run(run_id: int) -> None:
    """Take the run row's lock first in every transaction that changes a
    run's steps or mailboxes: the same order everywhere (run, then steps) so
    two writers never deadlock, and event numbers follow commit order."""
    with plain_cursor() as cursor:
        cursor.execute(lock_run_sql(), [run_id])


def lock_run_sql() -> str:
    lock = " FOR UPDATE" if _db().features.has_select_for_update else ""
    return f"SELECT 1 FROM {table(_run_model())} WHERE id = %s{lock}"


def update(model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> int:
    """UPDATE rows of ``model``: set ``values`` (field name -> value) where
    ``where`` holds (SQL over column names, ``%s`` for each of ``params``).
    Returns how many rows changed: the conditional UPDATE that claims work.

    ``locking_run``: take that run's lock first (``lock_run``), in the same
    statement on PostgreSQL: one round trip fewer while the run is locked."""
    if locking_run is not None and _db().vendor != "postgresql":
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


def _run_model():
    from runs.models import Run

    return Run


def update_returning(
    model, pk: int, values: dict, increments: dict, returning: list[str], also: tuple[str, list] | None = None
) -> tuple:
    """One UPDATE of row ``pk``: set ``values``, add ``increments`` (field ->
    amount), and return the ``returning`` fields as they are after it. The
    ORM needs a second query to read F() results back. ``also``: one more
    SQL expression to return last (a subquery, say) and its parameters."""
    assignments, params = _assignments(model, values, increments)
    quote = _db().ops.quote_name
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
    db = _db()
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
    db = _db()
    if db.vendor != "postgresql":
        model.objects.bulk_create(objs)
        return
    fields = _insert_fields(model)
    rows = [{field.column: _json_value(field, getattr(obj, field.attname)) for field in fields} for obj in objs]
    with plain_cursor() as cursor:
        cursor.execute(_insert_many_sql(model), [json_text(rows)])
        ids = [pk for (pk,) in cursor.fetchall()]
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = db.alias


@functools.cache
def _insert_fields(model) -> list:
    return [field for field in model._meta.concrete_fields if not field.primary_key]


@functools.cache
def _insert_many_sql(model) -> str:
    columns, names, source = json_rows(model, "r")
    # Rows go in, and their ids come back, in the document's order.
    return f"INSERT INTO {table(model)} ({columns}) SELECT {names} FROM {source} ORDER BY r.ordinality RETURNING id"


def _json_value(field, value):
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    if isinstance(value, datetime.date):  # and datetime, a subclass
        return value.isoformat()
    raise TypeError(f"runs/sql.py cannot send {field.model.__name__}.{field.name} as JSON: {type(value).__name__}")


def row_values(model, values: dict, computed: tuple[str, ...] = ()) -> tuple[str, list]:
    """The quoted columns and database values of a whole new row of ``model``
    as the ORM writes them: ``values`` (field name -> value), and every other
    field's default (Django's defaults are not the database's), except the
    auto primary key and the ``computed`` fields the SQL itself fills in. A
    field added to the model without a default fails here, by name."""
    items = _row_items(model, values, computed)
    columns = ", ".join(_db().ops.quote_name(field.column) for field, _ in items)
    return columns, [value for _, value in items]


def row_document(model, values: dict) -> dict:
    """``row_values``'s row as one JSON object, column -> value, for
    ``json_rows`` (PostgreSQL)."""
    return {field.column: _json_value(field, value) for field, value in _row_items(model, values, ())}


def _row_items(model, values: dict, computed: tuple[str, ...]) -> list[tuple]:
    db = _db()
    items = []
    for field, text in _row_fields(model):
        if field.name in values:
            value = values[field.name]
        elif field.primary_key or field.name in computed:
            continue
        else:
            value = field.get_default()
            if value is None and not field.null:
                raise TypeError(f"runs/sql.py writes {model.__name__} rows itself: give it a {field.name!r}")
        # A string for a text column is stored as it is: the ORM's
        # preparation would return it unchanged, at a cost paid for every
        # column of every message and event.
        items.append((field, value if text and value.__class__ is str else field.get_db_prep_save(value, db)))
    return items


@functools.cache
def _row_fields(model) -> tuple:
    """``model``'s concrete fields, each with whether it is a text column."""
    return tuple((f, f.get_internal_type() in ("CharField", "TextField")) for f in model._meta.concrete_fields)


def from_db(model, name: str, value):
    """``value`` of field ``name`` as read by raw SQL, converted as the ORM
    would (an aware datetime from SQLite's text, for instance)."""
    db = _db()
    return _convert(db, model, model._meta.get_field(name).attname, value)


def instance(model, names: list[str], values):
    """A ``model`` instance from a plain query's ``values`` of the fields
    ``names`` (attnames), converted as the ORM converts them; fields not
    named are deferred (loaded on first use), as with ``only()``."""
    db = _db()
    if len(names) != len(values):
        raise ValueError(f"{model.__name__}: {len(names)} fields named, {len(values)} values")
    converted = list(values)
    # Only the fields that have converters (JSON, datetimes on SQLite, ...):
    # a turn loads four rows of a few dozen columns each.
    for index, column, converters in _conversions(model, tuple(names), db.vendor):
        value = converted[index]
        for converter in converters:
            value = converter(value, column, db)
        converted[index] = value
    return model.from_db(db.alias, names, converted)


@functools.cache
def _conversions(model, names: tuple[str, ...], vendor: str) -> tuple:
    """(index, column, converters) of each of ``names`` that has converters."""
    plans = ((index, *_converters(model, name, vendor)) for index, name in enumerate(names))
    return tuple(plan for plan in plans if plan[2])


def _convert(db, model, attname: str, value):
    column, converters = _converters(model, attname, db.vendor)
    for converter in converters:
        value = converter(value, column, db)
    return value


@functools.cache
def _converters(model, attname: str, vendor: str) -> tuple:
    # Keyed on the vendor too: converters belong to a database backend.
    db = _db()
    field = next(f for f in model._meta.concrete_fields if f.attname == attname)
    column = field.get_col(model._meta.db_table)
    return column, db.ops.get_db_converters(column) + field.get_db_converters(db)


@functools.cache
def select_columns(model, alias: str, vendor: str, without: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The attnames of ``model``'s concrete fields but ``without``, and their
    columns prefixed with ``alias``, for a SELECT list."""
    fields = [f for f in model._meta.concrete_fields if f.name not in without]
    quote = _db().ops.quote_name
    return [f.attname for f in fields], ", ".join(f"{alias}.{quote(f.column)}" for f in fields)


# Big and not needed for a turn: the parsed spec is cached per version.
WORKFLOW_TEXT = ("spec", "yaml_text")


def step_for_turn(step_pk: int):
    """Step ``step_pk`` with its run, the run's workflow (but its text and
    stored spec) and the run's creator, as ``select_related`` would load
    them, or None; annotated, as ``annotate()`` would, with ``unread``: how
    many messages its mailbox holds unread (a turn with none skips reading
    them). One query, built once: the ORM took longer to build this join
    than PostgreSQL took to run it, on every step turn."""

    vendor = _db().vendor
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
    from runs.models import Run, Step

    vendor = _db().vendor
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


def instances(parts: list, row) -> tuple[list, int]:
    """The instances of ``parts`` ((model, attnames, ...) each) that one
    joined row holds, in order, and where the row's other columns start.
    A part whose primary key is None (a LEFT JOIN that found nothing) is None."""
    loaded, start = [], 0
    for model, names, *_ in parts:
        values = row[start : start + len(names)]
        start += len(names)
        loaded.append(None if values[0] is None else instance(model, names, values))
    return loaded, start


def _step_with_run(parts: list, row):
    from runs.models import Run, Step

    (step, run, workflow, user), start = instances(parts, row)
    step.unread = row[start]
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    Run._meta.get_field("created_by").set_cached_value(run, user)
    Step._meta.get_field("run").set_cached_value(step, run)
    return step


@functools.cache
def _claim_step_for_turn_sql(vendor: str) -> str:
    from runs.models import Run, Step

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
    from runs.models import Run, Step, Workflow

    user_model = Run._meta.get_field("created_by").related_model
    # Of the creator, a turn needs the username (injected into tool calls).
    kept = (user_model._meta.pk.name, user_model.USERNAME_FIELD)
    user_rest = tuple(f.name for f in user_model._meta.concrete_fields if f.name not in kept)
    aliased = ((Step, "s", ()), (Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", user_rest))
    return tuple((model, *select_columns(model, alias, vendor, without)) for model, alias, without in aliased)


@functools.cache
def _step_for_turn_sql(vendor: str) -> str:
    from runs.models import Run, Step

    columns, joins = _step_for_turn_columns(vendor)
    return f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} WHERE s.id = %s"


def _step_for_turn_columns(vendor: str) -> tuple[str, str]:
    """What a step loaded for its turn selects (the step, its run, workflow
    and creator, then its unread count), and the joins from its run ``r``."""
    from runs.stores import unread_count_of

    parts = _step_for_turn_parts(vendor)
    columns = ", ".join(select for _, _, select in parts) + ", " + unread_count_of("s.run_id", "s.step_id")
    return columns, run_joins(parts[3][0])


def run_joins(user_model) -> str:
    """The joins from a run ``r`` to its workflow ``w`` and creator ``u``."""
    from runs.models import Workflow

    return f"JOIN {table(Workflow)} w ON w.id = r.workflow_id LEFT JOIN {table(user_model)} u ON u.id = r.created_by_id"
