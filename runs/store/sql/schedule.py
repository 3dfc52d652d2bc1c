"""What scheduling reads after a step ends: the run's flags in one query,
and its steps' rows (``StepRow``), read on their own or with a last turn's
write (runs/store/sql/turns.py)."""

from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import NamedTuple

from agents.router import COORDINATOR
from runs.models import Run, Step, Workflow
from runs.store.sql.base import Statements
from runs.store.sql.mailboxes import unread_from
from runs.store.sql.rows import converter, database, from_db, table
from runs.store.sql.runs import lock_run_sql


class ScheduleState(NamedTuple):
    """What scheduling reads after a step ends (a tuple: scheduling unpacks it)."""

    status: str
    coordinator_busy: bool
    coordinator_has_mail: bool
    may_start: bool  # a pending step has no unfinished dependency: prefilter_pending_may_start
    all_done: bool
    workflow_id: int
    workflow_created: datetime


class ScheduleStatements(Statements):
    def schedule_state(self, run_id: int) -> ScheduleState | None:
        """For scheduling after a step ends, in one query: the run's status and
        coordinator_busy, whether the coordinator has unread mail, whether a
        pending step may start (prefilter_pending_may_start), whether every step is done
        (terminal, none being resumed), and its workflow's id and created. None
        if the run does not exist."""
        rows = self.fetch_all(schedule_state_sql(self.depends_on), {"coordinator": COORDINATOR, "run": run_id})
        return schedule_state_of(*rows[0]) if rows else None

    def locked_schedule_state(self, run_id: int) -> tuple[ScheduleState, list[StepRow]] | None:
        """Inside a transaction: take run ``run_id``'s lock, then read its
        scheduling state (as schedule_state) and its step rows (as step_rows),
        after the lock is granted: what its earlier holders committed. One
        round trip on PostgreSQL (``in_order``), not three. None
        if the run does not exist."""
        _, flags, rows = self.in_order(
            [
                (lock_run_sql(), {"run": run_id}),
                (schedule_state_sql(self.depends_on), {"coordinator": COORDINATOR, "run": run_id}),
                (_step_rows_sql(), {"run": run_id}),
            ]
        )
        if not flags:
            return None
        return schedule_state_of(*flags[0]), _step_rows_read(rows)

    def step_rows(self, run_id: int) -> list[StepRow]:
        """Run ``run_id``'s steps and loops, everything but its coordinator, in
        the workflow's order (``position``): the state machine starts ready
        steps in the order given, and a forEach loop's iterations must start
        as its list goes, not as their ids sort (deploy[10] before deploy[2])."""
        return _step_rows_read(self.fetch_all(_step_rows_sql(), {"run": run_id}))


def schedule_state_of(status, busy, has_mail, may_start, has_unfinished, workflow_id, created) -> ScheduleState:
    created = from_db(Workflow, "created", created)
    return ScheduleState(status, bool(busy), bool(has_mail), bool(may_start), not has_unfinished, workflow_id, created)


@functools.cache
def schedule_state_sql(depends_on: tuple[str, str]) -> str:
    """``schedule_state``'s statement; ``depends_on``: the store's ``depends_on``."""
    # Plain SQL: the ORM takes ten times longer to build this than
    # PostgreSQL to run it, after every step of a run.
    return (
        f"SELECT r.status, r.coordinator_busy, {schedule_flags(depends_on, 'r.id')}, "
        f"r.workflow_id, w.created FROM {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id "
        "WHERE r.id = %(run)s"
    )


def schedule_flags(depends_on: tuple[str, str], run: str, other_than: str = "", *, may_start: str | None = None) -> str:
    """Whether the coordinator of run ``run`` (a column or a placeholder) has
    unread mail, a pending step may start (``prefilter_pending_may_start``, or the
    column ``may_start`` names), and a step other than ``other_than`` (a
    step's id column or a placeholder; empty: none) is unfinished. The
    coordinator's mailbox is the parameter ``coordinator``; ``depends_on``:
    the store's (its database's way to read a step's dependencies).

    The kinds and statuses are written in, not bound: a prepared statement's
    generic plan could not tell that its parameters match the partial
    indexes step_pending and step_unfinished (runs/models/runs.py), and would
    read every step of the run."""
    other = f" AND s.id <> {other_than}" if other_than else ""
    return (
        f"EXISTS(SELECT 1 {unread_from(run, '%(coordinator)s')}), "
        f"{may_start or prefilter_pending_may_start(depends_on, run, other_than)}, "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} "
        f"AND (s.resuming OR s.status NOT IN ({_quoted(*Step.TERMINAL)})){other})"
    )


def prefilter_pending_may_start(depends_on: tuple[str, str], run: str, other_than: str = "") -> str:
    """A prefilter, never the decision: whether a pending step of run
    ``run`` has no unfinished dependency but ``other_than`` (as in
    schedule_flags: the step the statement completes, which its snapshot
    still sees running). The decision (which also weighs caps and the
    coordinator's mail) is the state machine's (agents/core/machine.py
    decide); this is what any decision to start a step needs: where no
    step passes it, decide is given the run's flags without its steps
    (scheduling.schedule). A report waiting for a 500-iteration loop fails
    it while any iteration runs, found at the first unfinished step looked at."""
    other = f" AND s.id <> {other_than}" if other_than else ""
    no_dependency, depends_on_s = depends_on
    unfinished_dependency = (
        f"SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} "
        f"AND s.status NOT IN ({_quoted(*Step.TERMINAL)}){other} AND {depends_on_s}"
    )
    return (
        f"EXISTS(SELECT 1 FROM {table(Step)} p WHERE p.run_id = {run} "
        f"AND p.kind = {_quoted(Step.Kind.STEP)} AND p.status = {_quoted(Step.Status.PENDING)} "
        f"AND ({no_dependency} OR NOT EXISTS({unfinished_dependency})))"
    )


def _quoted(*values: str) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


class StepRow(NamedTuple):
    """What scheduling reads of a step or loop: not its transcript or
    output, which in a wide run would cost more to load than the rest.
    Its JSON columns as tuples (``step_row_of`` makes them), which the
    state machine takes as they are."""

    pk: int
    step_id: str
    kind: str
    agent: str
    status: str
    depends_on: tuple[str, ...]
    limits: tuple[tuple[str, int], ...]
    resuming: bool
    position: int


def step_row_of(pk, step_id, kind, agent, status, depends_on: list, limits: list, resuming, position) -> StepRow:
    """A StepRow from a step's values, its JSON columns decoded."""
    return StepRow(pk, step_id, kind, agent, status, _frozen(depends_on), _frozen(limits), bool(resuming), position)


def _frozen(items: list) -> tuple:
    """A JSON column's list as a tuple, a list in it (a cap's [group, cap]) too."""
    return tuple(tuple(item) if isinstance(item, list) else item for item in items)


# The columns of a StepRow, in its order.
STEP_ROW_COLUMNS = ("id", "step_id", "kind", "agent", "status", "depends_on", "limits", "resuming", "position")


def _step_rows_read(rows) -> list[StepRow]:
    """StepRows of the rows _step_rows_sql read, converted as the ORM would."""
    return _step_rows_decoded(rows, converter(Step, "depends_on"), converter(Step, "limits"))


def _step_rows_decoded(rows, decode_depends_on, decode_limits) -> list[StepRow]:
    """StepRows of ``rows`` (STEP_ROW_COLUMNS' values, the JSON columns as
    text). A capped loop reads every row of its run after each step ends:
    each distinct JSON text (a loop's caps, "[]") is decoded once a read."""
    depends_on, limits = _decoded_once(decode_depends_on), _decoded_once(decode_limits)
    return [
        StepRow(pk, step_id, kind, agent, status, depends_on(needs), limits(caps), bool(resuming), position)
        for pk, step_id, kind, agent, status, needs, caps, resuming, position in rows
    ]


def _decoded_once(decode):
    """``decode`` (a JSON column's text to a list), frozen (``_frozen``),
    each distinct text decoded once."""
    decoded: dict = {}

    def once(text):
        value = decoded.get(text)
        if value is None:
            value = decoded[text] = _frozen(decode(text))
        return value

    return once


@functools.cache
def _step_rows_sql() -> str:
    quote = database().ops.quote_name
    columns = ", ".join(f"s.{quote(column)}" for column in STEP_ROW_COLUMNS)
    return (
        f"SELECT {columns} FROM {table(Step)} s WHERE s.run_id = %(run)s "
        f"AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} ORDER BY s.position"
    )


def step_rows_document(run: str, finished: str, finished_status: str) -> str:
    """PostgreSQL: run ``run``'s step rows as one JSON text (an array of
    arrays, in StepRow's order), with the status of step ``finished`` (an
    id) read as ``finished_status``: for a statement that has just written
    that step, whose snapshot does not see its own write. ``run``,
    ``finished`` and ``finished_status`` are columns or placeholders."""
    columns = [f"s.{column}" for column in STEP_ROW_COLUMNS]
    columns[STEP_ROW_COLUMNS.index("status")] = f"CASE WHEN s.id = {finished} THEN {finished_status} ELSE s.status END"
    # The JSON columns as text in the text: step_rows_of decodes each distinct one once.
    for column in ("depends_on", "limits"):
        columns[STEP_ROW_COLUMNS.index(column)] = f"s.{column}::text"
    return (
        f"(SELECT json_agg(json_build_array({', '.join(columns)}) ORDER BY s.position)::text "
        f"FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)})"
    )


def step_rows_of(document: str) -> list[StepRow]:
    """The rows of a step_rows_document."""
    return _step_rows_decoded(json.loads(document), json.loads, json.loads)
