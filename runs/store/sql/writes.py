"""UPDATE and INSERT of any model's rows, without the ORM's per-query and
per-instance work: the conditional UPDATE that claims work, an UPDATE that
returns what it wrote, and INSERTs of one row or many.

These take positional ``%s`` parameters, unlike the fixed statements of
the other modules: their columns vary with the model and the call, and the
callers write their WHERE clauses with ``%s``."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from django.db.models import Model

from runs.store.sql.pg_text import json_text
from runs.store.sql.rows import (
    database,
    insert_fields,
    json_value,
    row_values,
    table,
)
from runs.store.sql.runs import RunStatements, lock_run_sql


class WriteStatements(RunStatements):
    def update(self, model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> int:
        """UPDATE rows of ``model``: set ``values`` (field name -> value) where
        ``where`` holds (SQL over column names, ``%s`` for each of ``params``).
        Returns how many rows changed: the conditional UPDATE that claims work.
        For the store's own statements: callers outside it name what they
        write (a method of the store each).

        ``locking_run``: take that run's lock first (``lock_run``; in the same
        statement on PostgreSQL: one round trip fewer while the run is locked)."""
        if locking_run is not None:
            self.lock_run(locking_run)
        return self.update_rows(*update_sql(model, values, where, params))

    def update_rows(self, statement: str, params: Mapping | Sequence) -> int:
        """How many rows an UPDATE changed."""
        with self.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.rowcount

    def update_returning(
        self,
        model,
        pk: int,
        values: dict,
        increments: dict,
        returning: list[str],
        also: tuple[str, list] | None = None,
        *,
        then_insert: Sequence = (),
    ) -> tuple:
        """One UPDATE of row ``pk``: set ``values``, add ``increments`` (field ->
        amount), and return the ``returning`` fields as they are after it. The
        ORM needs a second query to read F() results back. ``also``: one more
        SQL expression to return last (a subquery, say) and its parameters.
        ``then_insert``: new rows of another model (a turn's tool calls, after
        its step) inserted after it, as ``insert_many``, inside the caller's
        transaction (in the same round trip on PostgreSQL)."""
        update = update_returning_statement(model, pk, values, increments, returning, also)
        return updated(model, pk, self.update_then_insert(update, list(then_insert)))

    def update_then_insert(self, update: tuple[str, list], objs: list) -> list[tuple]:
        """The rows ``update`` (an UPDATE ... RETURNING and its parameters)
        returned, with ``objs`` then inserted (``insert_many``)."""
        with self.cursor() as cursor:
            cursor.execute(*update)
            rows = cursor.fetchall()
        self.insert_many(objs)
        return rows

    def insert(self, model, **values) -> None:
        """One INSERT of a row of ``model`` (field name -> value), without the
        ORM's per-instance work: for the rows written per routed message."""
        columns, params = row_values(model, values)
        with self.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(params))})",
                params,
            )

    def insert_many(self, objs: list) -> None:
        """INSERT ``objs`` (new instances of one model, made by its constructor,
        so every default is filled in) and set their primary keys, as
        bulk_create does (in one statement of one JSON document on PostgreSQL)."""
        if objs:
            type(objs[0]).objects.bulk_create(objs)


def update_sql(model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> tuple[str, list]:
    """``update``'s statement and its parameters; ``locking_run``: the
    run's lock taken first in the same statement (PostgreSQL only)."""
    assignments, values_params = _assignments(model, values, {})
    if locking_run is None:
        return f"UPDATE {table(model)} SET {assignments} WHERE {where}", [*values_params, *params]
    # An uncorrelated EXISTS is evaluated once, before any row is read: the
    # run's lock is taken before the rows', as lock_run would. (A row
    # changed while this waited is checked again.)
    statement = (
        f"WITH locked AS ({lock_run_sql('%s')}) "
        f"UPDATE {table(model)} SET {assignments} WHERE ({where}) AND EXISTS (SELECT 1 FROM locked)"
    )
    return statement, [locking_run, *values_params, *params]


def update_returning_statement(
    model, pk: int, values: dict, increments: dict, returning: list[str], also: tuple[str, list] | None
) -> tuple[str, list]:
    assignments, params = _assignments(model, values, increments)
    quote = database().ops.quote_name
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in returning)
    extra, extra_params = also or ("", [])
    if extra:
        columns = f"{columns}, {extra}"
    return f"UPDATE {table(model)} SET {assignments} WHERE id = %s RETURNING {columns}", [*params, pk, *extra_params]


def updated(model, pk: int, rows: list[tuple]) -> tuple:
    if not rows:
        raise model.DoesNotExist(f"{model.__name__} {pk} does not exist")
    return rows[0]


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


def insert_many_statement(objs: Sequence) -> tuple[str, dict]:
    """PostgreSQL's statement for ``insert_many``, and its parameters: the
    rows travel as one JSON document that jsonb_populate_recordset turns
    into rows (bulk_create spends about 0.1 ms a row preparing and binding
    its thirty-odd parameters: 60 ms for a 500-step fan-out, before its
    first step can start)."""
    model: type[Model] = type(objs[0])
    fields = insert_fields(model)
    rows = [{field.column: json_value(field, getattr(obj, field.attname)) for field in fields} for obj in objs]
    return _insert_many_sql(model), {"rows": json_text(rows)}


def set_ids(objs: Sequence, ids: list[int]) -> None:
    alias = database().alias
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = alias


@functools.cache
def _insert_many_sql(model) -> str:
    columns, names, source = json_rows(model, "r")
    # Rows go in, and their ids come back, in the document's order.
    return f"INSERT INTO {table(model)} ({columns}) SELECT {names} FROM {source} ORDER BY r.ordinality RETURNING id"


def json_rows(model, alias: str) -> tuple[str, str, str]:
    """For an INSERT ... SELECT of whole new rows of ``model`` sent as one
    JSON document (PostgreSQL; its parameter ``rows``: ``json_text`` of a
    list of ``row_document``): the quoted columns, the same read from ``alias``,
    and the FROM item that turns the document into rows, numbered in its
    order as ``alias.ordinality``. A value too long for its column is
    refused as an INSERT refuses it, never cut."""
    quote = database().ops.quote_name
    fields = insert_fields(model)
    columns = ", ".join(quote(field.column) for field in fields)
    names = ", ".join(f"{alias}.{quote(field.column)}" for field in fields)
    source = f"ROWS FROM (jsonb_populate_recordset(NULL::{table(model)}, %(rows)s::jsonb)) WITH ORDINALITY AS {alias}"
    return columns, names, source
