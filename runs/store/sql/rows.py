"""Rows read and written by plain SQL (runs/store/sql/) exactly as the ORM
would: every field's default filled in, every value converted on the way in
and out (the cursor those statements run on is the store's: base.py). Column names in the
callers' WHERE clauses are the fields' names (no model here sets
``db_column``).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Sequence

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Field, Model


def database():
    # One lookup per call: every attribute of django.db.connection goes
    # through an asgiref Local, which a hot path pays for dozens of times.
    return connections[DEFAULT_DB_ALIAS]


# A WHERE condition for a statement that only takes a lease (a step's turn,
# a coordinator's wake) and commits on its own: PostgreSQL commits that
# transaction without waiting for its WAL to reach the disk
# (synchronous_commit off for it alone, which the server reads at commit).
# The lease is visible to every other transaction at once, and made durable
# by the next synchronous commit of any (the WAL is flushed in order: the
# worker's own write of its turn, or anyone's decision that read the
# lease). A crash of PostgreSQL can lose it only with everything committed
# after it, and then the turn or the wake is as it was before (still marked
# queued: Step.turn_queued, Run.wake_queued), and the sweeper queues it
# again, as when a worker dies holding a lease. One fsync a step less in a
# fan-out (docs/benchmarks.md). Never inside a caller's transaction: it
# would hold back the flush of everything that transaction writes.
LEASE_ONLY_COMMIT = "set_config('synchronous_commit', 'off', true) IS NOT NULL"


def first(rows: list[tuple]) -> tuple | None:
    """The one row of ``rows`` (a statement's that returns at most one), or None."""
    return rows[0] if rows else None


def column_of(model: type[Model], name: str) -> str:
    """The column (unquoted) of ``model``'s field ``name``."""
    field = concrete_field(model, name)
    assert field.column is not None  # a concrete field has one
    return field.column


def concrete_field(model: type[Model], name: str) -> Field:
    """``model``'s field ``name``, one with a column (not a relation's reverse side)."""
    field = model._meta.get_field(name)
    assert isinstance(field, Field), f"{model.__name__}.{name} has no column"
    return field


@functools.cache
def table(model) -> str:
    """``model``'s table, quoted (a process has one database: the store's)."""
    return database().ops.quote_name(model._meta.db_table)


def db_value(model, name: str, value):
    """``value`` for field ``name`` as the database takes it (a datetime as
    SQLite's text, for instance): for the parameters of a WHERE clause."""
    return model._meta.get_field(name).get_db_prep_value(value, database())


def save_values(model, values: dict) -> dict:
    """``values`` (field name -> value) of fields of ``model`` as the
    database takes them in a write (the ORM's preparation for saving), in
    one call for a whole row's."""
    db = database()
    return {name: concrete_field(model, name).get_db_prep_save(value, db) for name, value in values.items()}


@functools.cache
def insert_fields(model) -> list:
    return [field for field in model._meta.concrete_fields if not field.primary_key]


def json_value(field, value):
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    if isinstance(value, datetime.date):  # and datetime, a subclass
        return value.isoformat()
    raise TypeError(f"cannot send {field.model.__name__}.{field.name} as JSON: {type(value).__name__}")


def row_values(model, values: dict, computed: tuple[str, ...] = ()) -> tuple[str, list]:
    """The quoted columns and database values of a whole new row of ``model``
    as the ORM writes them: ``values`` (field name -> value), and every other
    field's default (Django's defaults are not the database's), except the
    auto primary key and the ``computed`` fields the SQL itself fills in. A
    field added to the model without a default fails here, by name."""
    items = _row_items(model, values, computed)
    columns = ", ".join(database().ops.quote_name(field.column) for field, _ in items)
    return columns, [value for _, value in items]


def row_document(model, values: dict) -> dict:
    """``row_values``'s row as one JSON object, column -> value, for
    ``json_rows`` (PostgreSQL)."""
    return {field.column: json_value(field, value) for field, value in _row_items(model, values, ())}


def _row_items(model, values: dict, computed: tuple[str, ...]) -> list[tuple]:
    db = database()
    items = []
    for field, text in _row_fields(model):
        if field.name in values:
            value = values[field.name]
        elif field.primary_key or field.name in computed:
            continue
        else:
            value = field.get_default()
            if value is None and not field.null:
                raise TypeError(f"runs/store/sql/rows.py writes {model.__name__} rows itself: give it a {field.name!r}")
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
    return converter(model, name)(value)


def converter(model, name: str):
    """``from_db`` for field ``name`` of ``model`` as a function of the
    value, its converters looked up once: for one column of many rows."""
    db = database()
    column, converters = _converters(model, model._meta.get_field(name).attname)
    if not converters:
        return lambda value: value

    def convert(value):
        for function in converters:
            value = function(value, column, db)
        return value

    return convert


def instance(model, names: list[str], values):
    """A ``model`` instance from a plain query's ``values`` of the fields
    ``names`` (attnames), converted as the ORM converts them; fields not
    named are deferred (loaded on first use), as with ``only()``."""
    db = database()
    if len(names) != len(values):
        raise ValueError(f"{model.__name__}: {len(names)} fields named, {len(values)} values")
    converted = list(values)
    # Only the fields that have converters (JSON, datetimes on SQLite, ...):
    # a turn loads four rows of a few dozen columns each.
    for index, column, converters in _conversions(model, tuple(names)):
        value = converted[index]
        for converter in converters:
            value = converter(value, column, db)
        converted[index] = value
    return model.from_db(db.alias, names, converted)


def instances(parts: Sequence, row) -> tuple[list, int]:
    """The instances of ``parts`` ((model, attnames, ...) each) that one
    joined row holds, in order, and where the row's other columns start.
    A part whose primary key is None (a LEFT JOIN that found nothing) is None."""
    loaded, start = [], 0
    for model, names, *_ in parts:
        values = row[start : start + len(names)]
        start += len(names)
        loaded.append(None if values[0] is None else instance(model, names, values))
    return loaded, start


@functools.cache
def _conversions(model, names: tuple[str, ...]) -> tuple:
    """(index, column, converters) of each of ``names`` that has converters."""
    plans = ((index, *_converters(model, name)) for index, name in enumerate(names))
    return tuple(plan for plan in plans if plan[2])


@functools.cache
def _converters(model, attname: str) -> tuple:
    # Converters belong to a database backend: a process has one (its store's).
    db = database()
    field = next(f for f in model._meta.concrete_fields if f.attname == attname)
    column = field.get_col(model._meta.db_table)
    return column, db.ops.get_db_converters(column) + field.get_db_converters(db)


@functools.cache
def select_columns(model, alias: str, without: tuple[str, ...] = ()) -> tuple[list[str], str]:
    """The attnames of ``model``'s concrete fields but ``without``, and their
    columns prefixed with ``alias``, for a SELECT list."""
    fields = [f for f in model._meta.concrete_fields if f.name not in without]
    quote = database().ops.quote_name
    return [f.attname for f in fields], ", ".join(f"{alias}.{quote(f.column)}" for f in fields)
