"""The reads of a live update in plain SQL (runs/live.py): the events after a
cursor, the run with its header's figures, the step rows the events touched.

Every dashboard of a running run gets an update per commit of the run, and
one process renders them all, one at a time: built by the ORM these reads
took 10 of a 5-event update's 13 ms, most of it building the queries. Here
each statement is written once, prepared on the connection, and its rows
become model instances converted as the ORM converts them (runs/store/rows.py).
"""

from __future__ import annotations

import functools

from django.db import connection

from runs.actions.budgets import ROLE_SQL, ROLES, Tokens, TokenTotals
from runs.models import Event, Run, Step, Workflow
from runs.store.rows import instance, instances, plain_cursor, select_columns, table
from runs.store.sql import WORKFLOW_TEXT, run_joins, unread_count_of

# A step row as the step list shows it: never its transcript or variables.
STEP_ROW_UNUSED = ("transcript", "variables")


def events_after(run_id: int, after: int, limit: int) -> list[Event]:
    """Up to ``limit`` events of run ``run_id`` after seq ``after``, in order."""
    names, columns = select_columns(Event, "e", connection.vendor)
    with plain_cursor() as cursor:
        cursor.execute(
            f"SELECT {columns} FROM {table(Event)} e WHERE e.run_id = %s AND e.seq > %s ORDER BY e.seq LIMIT %s",
            [run_id, after, limit],
        )
        return [instance(Event, names, row) for row in cursor.fetchall()]


def run_with_header(run_id: int) -> tuple[Run, dict[str, int], int, TokenTotals]:
    """Run ``run_id`` with its workflow (but its text) and creator, as
    select_related loads them, and its header's figures: the steps that
    ended, by status, steps in all, tokens by role. One query. Raises
    Run.DoesNotExist."""
    parts = _run_parts(connection.vendor)
    with plain_cursor() as cursor:
        cursor.execute(_run_with_header_sql(connection.vendor), [run_id, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    (run, workflow, user), start = instances(parts, row)
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    Run._meta.get_field("created_by").set_cached_value(run, user)
    figures = [value or 0 for value in row[start:]]
    ended = dict(zip(Step.TERMINAL, figures, strict=False))
    total, *sums = figures[len(Step.TERMINAL) :]
    tokens = TokenTotals(**{role: Tokens(sums[2 * n], sums[2 * n + 1]) for n, role in enumerate(ROLES)})
    return run, ended, total, tokens


def step_rows(run_id: int, step_ids: set[str]) -> list[Step]:
    """The steps ``step_ids`` of run ``run_id`` as the step list shows them,
    each with ``unread``: how many messages wait in its mailbox."""
    if not step_ids:
        return []
    names, columns = select_columns(Step, "s", connection.vendor, STEP_ROW_UNUSED)
    wanted = sorted(step_ids)
    with plain_cursor() as cursor:
        cursor.execute(
            f"SELECT {columns}, {_unread_of_step()} FROM {table(Step)} s "
            f"WHERE s.run_id = %s AND s.step_id IN ({', '.join(['%s'] * len(wanted))}) ORDER BY s.position, s.id",
            [run_id, *wanted],
        )
        rows = cursor.fetchall()
    steps = []
    for row in rows:
        step = instance(Step, names, row[:-1])
        step.unread = row[-1]
        steps.append(step)
    return steps


def _unread_of_step() -> str:
    return unread_count_of("s.run_id", "s.step_id")


@functools.cache
def _run_parts(vendor: str) -> tuple:
    user_model = Run._meta.get_field("created_by").related_model
    aliased = ((Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", ()))
    return tuple((model, *select_columns(model, alias, vendor, without)) for model, alias, without in aliased)


@functools.cache
def _run_with_header_sql(vendor: str) -> str:
    parts = _run_parts(vendor)
    work = f"kind = '{Step.Kind.STEP}'"
    figures = [f"COUNT(*) FILTER (WHERE {work} AND status = '{status}')" for status in Step.TERMINAL]
    figures.append(f"COUNT(*) FILTER (WHERE {work})")
    figures += [
        f"SUM({part}_tokens) FILTER (WHERE {ROLE_SQL[role]})" for role in ROLES for part in ("prompt", "completion")
    ]
    names = [f"h{n}" for n in range(len(figures))]
    header = ", ".join(f"{figure} AS {name}" for figure, name in zip(figures, names, strict=True))
    columns = ", ".join(select for _, _, select in parts)
    return (
        f"SELECT {columns}, {', '.join(f'h.{name}' for name in names)} FROM {table(Run)} r "
        f"{run_joins(parts[2][0])} "
        f"LEFT JOIN (SELECT run_id, {header} FROM {table(Step)} WHERE run_id = %s GROUP BY run_id) h "
        "ON h.run_id = r.id WHERE r.id = %s"
    )
