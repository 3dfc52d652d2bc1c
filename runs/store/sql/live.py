"""The reads of a live update (runs/live.py): the events after a cursor, the
run with its header's figures, the step rows the events touched.

Every dashboard of a running run gets an update per commit of the run, and
one process renders them all, one at a time: built by the ORM these reads
take 10 of a 5-event update's 13 ms, most of it building the queries. Here
each statement is written once, prepared on the connection, and its rows
become model instances converted as the ORM converts them (rows.py).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from runs.models import Event, Run, Step, Workflow
from runs.store.sql.base import Statements
from runs.store.sql.mailboxes import unread_count_of
from runs.store.sql.rows import instance, instances, select_columns, table
from runs.store.sql.steps import WORKFLOW_TEXT, run_joins

# A step row as the step list shows it: never its transcript or variables.
STEP_ROW_UNUSED = ("transcript", "variables")

# Whose tokens a step row's are, as SQL conditions on it (the same roles as
# runs/actions/budgets.py's, whose totals_from takes RunHeader.token_sums).
TOKEN_ROLES = {
    "coordinator": f"kind = '{Step.Kind.COORDINATOR}'",
    "steps": f"kind <> '{Step.Kind.COORDINATOR}' AND spawned_by = ''",
    "workers": f"kind <> '{Step.Kind.COORDINATOR}' AND spawned_by <> ''",
}
_TOKEN_SUMS = [
    (f"{role}_{part}", part, where) for role, where in TOKEN_ROLES.items() for part in ("prompt", "completion")
]


class RunHeader(NamedTuple):
    """A run as its live header shows it. ``run``: with its workflow (but
    its text) and creator loaded, as select_related loads them; ``ended``:
    the run's steps that ended, by status; ``total``: its steps in all;
    ``token_sums``: its tokens by role and part (``steps_prompt``...)."""

    run: Run
    ended: dict[str, int]
    total: int
    token_sums: dict[str, int]


class LiveReads(Statements):
    def live_events_after(self, run_id: int, after: int, limit: int) -> list[Event]:
        """Up to ``limit`` events of run ``run_id`` after seq ``after``, in order."""
        names, _ = select_columns(Event, "e")
        rows = self.fetch_all(_events_after_sql(), {"run": run_id, "after": after, "limit": limit})
        return [instance(Event, names, row) for row in rows]

    def live_run_header(self, run_id: int) -> RunHeader:
        """Run ``run_id``'s header (RunHeader), in one query. Raises Run.DoesNotExist."""
        rows = self.fetch_all(_run_header_sql(), {"run": run_id})
        if not rows:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        row = rows[0]
        (run, workflow, user), start = instances(_run_parts(), row)
        Run._meta.get_field("workflow").set_cached_value(run, workflow)
        Run._meta.get_field("created_by").set_cached_value(run, user)
        figures = [value or 0 for value in row[start:]]
        ended = dict(zip(Step.TERMINAL, figures, strict=False))
        total, *sums = figures[len(Step.TERMINAL) :]
        return RunHeader(
            run, ended, total, {name: value for (name, _, _), value in zip(_TOKEN_SUMS, sums, strict=True)}
        )

    def live_step_rows(self, run_id: int, step_ids: set[str]) -> list[Step]:
        """The steps ``step_ids`` of run ``run_id`` as the step list shows them,
        in position order, each with ``unread``: how many messages wait in its
        mailbox."""
        if not step_ids:
            return []
        names, _ = select_columns(Step, "s", STEP_ROW_UNUSED)
        wanted = {f"step{n}": step_id for n, step_id in enumerate(sorted(step_ids))}
        steps = []
        for row in self.fetch_all(_step_rows_sql(len(wanted)), {"run": run_id, **wanted}):
            step = instance(Step, names, row[:-1])
            step.unread = row[-1]
            steps.append(step)
        return steps


@functools.cache
def _events_after_sql() -> str:
    _, columns = select_columns(Event, "e")
    return (
        f"SELECT {columns} FROM {table(Event)} e WHERE e.run_id = %(run)s AND e.seq > %(after)s "
        "ORDER BY e.seq LIMIT %(limit)s"
    )


@functools.cache
def _step_rows_sql(count: int) -> str:
    # One text per count of steps: a statement is prepared once per
    # connection and text on PostgreSQL (postgres.py).
    _, columns = select_columns(Step, "s", STEP_ROW_UNUSED)
    wanted = ", ".join(f"%(step{n})s" for n in range(count))
    return (
        f"SELECT {columns}, {unread_count_of('s.run_id', 's.step_id')} FROM {table(Step)} s "
        f"WHERE s.run_id = %(run)s AND s.step_id IN ({wanted}) ORDER BY s.position, s.id"
    )


@functools.cache
def _run_parts() -> tuple:
    user_model = Run._meta.get_field("created_by").related_model
    aliased = ((Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", ()))
    return tuple((model, *select_columns(model, alias, without)) for model, alias, without in aliased)


@functools.cache
def _run_header_sql() -> str:
    parts = _run_parts()
    work = f"kind = '{Step.Kind.STEP}'"
    figures = [f"COUNT(*) FILTER (WHERE {work} AND status = '{status}')" for status in Step.TERMINAL]
    figures.append(f"COUNT(*) FILTER (WHERE {work})")
    figures += [f"SUM({part}_tokens) FILTER (WHERE {where})" for _, part, where in _TOKEN_SUMS]
    names = [f"h{n}" for n in range(len(figures))]
    header = ", ".join(f"{figure} AS {name}" for figure, name in zip(figures, names, strict=True))
    columns = ", ".join(select for _, _, select in parts)
    return (
        f"SELECT {columns}, {', '.join(f'h.{name}' for name in names)} FROM {table(Run)} r "
        f"{run_joins(parts[2][0])} "
        f"LEFT JOIN (SELECT run_id, {header} FROM {table(Step)} WHERE run_id = %(run)s GROUP BY run_id) h "
        "ON h.run_id = r.id WHERE r.id = %(run)s"
    )
