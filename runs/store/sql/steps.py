"""A step loaded and claimed for its turn, and pending steps started."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, cast

from django.conf import settings
from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR
from runs.models import Run, Step, Workflow
from runs.store.sql.events import EventStatements
from runs.store.sql.mailboxes import unread_count_of, unread_from
from runs.store.sql.rows import column_of, database, db_value, instances, select_columns, table

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser

# Big and not needed for a turn: the parsed spec is cached per version.
WORKFLOW_TEXT = ("spec", "yaml_text")


class StepStatements(EventStatements):
    def step_for_turn(self, step_pk: int):
        """Step ``step_pk`` with its run, the run's workflow (but its text and
        stored spec) and the run's creator, as ``select_related`` would load
        them, or None; annotated, as ``annotate()`` would, with ``unread``: how
        many messages its mailbox holds unread (a turn with none skips reading
        them). One query, built once: the ORM takes longer to build this join
        than PostgreSQL takes to run it, on every step turn."""
        rows = self.fetch_all(_step_for_turn_sql(), {"step": step_pk})
        return step_with_run(rows[0]) if rows else None

    def claim_step_for_turn(self, step_pk: int, turn: int, owner: str, expires, now):
        """Take the lease on turn ``turn`` of step ``step_pk`` until ``expires``
        (the step and its run running, the turn the next one, no live lease at
        ``now`` but ``owner``'s), clearing its queued mark (``Step.turn_queued``),
        and return the step loaded as ``step_for_turn`` loads it; None if the
        turn is not this worker's to take. Raises Step.DoesNotExist for a step
        that is gone. One statement on PostgreSQL: on a worker every turn paid a
        round trip to load the step and another to claim it."""
        step = self.step_for_turn(step_pk)
        if step is None:
            raise Step.DoesNotExist(f"step {step_pk} does not exist")
        if step.run.status != Run.Status.RUNNING or step.status != Step.Status.RUNNING or step.turns != turn - 1:
            return None
        if not self.claim_step(step_pk, turn, owner, expires, now):
            return None
        # As PostgreSQL's RETURNING gives it back: claimed.
        step.lease_owner, step.lease_expires, step.turn_queued = owner, expires, None
        return step

    def claim_step(self, step_pk: int, turn: int, owner: str, expires, now) -> bool:
        """Take the lease on turn ``turn`` of a step until ``expires``; False if
        another worker holds it at ``now`` (or the turn was taken already)."""
        params = [step_pk, Step.Status.RUNNING, turn - 1, owner, db_value(Step, "lease_expires", now)]
        return bool(
            self.update(
                Step,
                # Claimed, the turn is no longer queued: the sweeper leaves it to the lease.
                {"lease_owner": owner, "lease_expires": expires, "turn_queued": None},
                f"id = %s AND status = %s AND turns = %s AND {self.lease_free('', '%s', '%s', '%s')}",
                params + self.lease_grace_params(),
            )
        )

    def start_pending_steps(self, pks: list[int], now) -> set[int]:
        """pending -> running for the steps ``pks``, their first turn marked
        queued at ``now`` (Step.turn_queued); the ids it changed. A step another
        scheduling pass started already is left alone: each starts once."""
        if not pks:
            return set()
        # Padded to a power of two with an id no row has: a statement's text is
        # prepared once per connection on PostgreSQL (postgres.py). Its
        # parameters stay positional: the IN list is a run of %s as long as the
        # padding.
        size = 1 << (len(pks) - 1).bit_length()
        when = db_value(Step, "started", now)
        params = [Step.Status.RUNNING, when, when, *pks, *[0] * (size - len(pks)), Step.Status.PENDING]
        return {row[0] for row in self.fetch_all(_start_pending_steps_sql(size), params)}

    def start_steps(self, run_id: int, starts: list[tuple[int, RuntimeEvent]], now) -> tuple[list[int], int | None]:
        """Start the steps of ``starts`` (step id, its step_start event) that
        are still pending (start_pending_steps) and store the events of those,
        numbered with the run's next seqs, in order: in one transaction. The
        ids of the steps it started, and the seq of the last event (None if it
        started none).

        On PostgreSQL one statement, in the caller's transaction or, outside
        one, committed on its own: a chain's successor starts in one round trip
        instead of four (BEGIN, the UPDATE, the events' INSERT, COMMIT)."""
        if not starts:
            return [], None
        with transaction.atomic(savepoint=False):
            started = self.start_pending_steps([pk for pk, _ in starts], now)
            events = [(event, now) for pk, event in starts if pk in started]
            seqs = self.insert_events(run_id, events) if events else [None]
        return [pk for pk, _ in starts if pk in started], seqs[-1]

    def start_and_claim_step(self, run_id: int, successor: Successor) -> tuple[Step, int] | None:
        """Start step ``successor.pk`` (pending -> running), with its step_start
        event, and take the lease on its first turn for its owner: the worker
        that started it takes that turn (eager continuation). Only while its
        run runs, its coordinator is neither busy nor has unread mail (its
        dependents wait for it: see scheduling.schedule) and every step it
        depends on completed. Returns the step loaded as ``step_for_turn``
        loads it, and the seq of its event; None if it did not start.

        On PostgreSQL one statement (in the caller's transaction or, outside
        one, committed on its own), where start_steps and claim_step_for_turn
        were two."""
        with transaction.atomic(savepoint=False):
            params = {"step": successor.pk, **prefilter_guess_params()}
            if not self.fetch_all(_prefilter_guess_sql(self.dependencies_of_s), params):
                return None
            started, last_seq = self.start_steps(run_id, [(successor.pk, successor.event)], successor.now)
            step = (
                self.claim_step_for_turn(successor.pk, 1, successor.owner, successor.expires, successor.now)
                if started
                else None
            )
        return None if step is None or last_seq is None else (step, last_seq)


def lease_grace() -> float:
    return float(settings.ZENWEB_LEASE_SECONDS)


def step_with_run(row):
    """A step loaded for its turn from a row of step_for_turn_columns."""
    (step, run, workflow, user), start = instances(step_for_turn_parts(), row)
    step.unread = row[start]
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    Run._meta.get_field("created_by").set_cached_value(run, user)
    Step._meta.get_field("run").set_cached_value(step, run)
    return step


@functools.cache
def step_for_turn_parts() -> tuple:
    """(model, attnames) of the step, its run, workflow and creator."""
    return tuple((model, names) for model, names, _ in _step_for_turn_selects())


@functools.cache
def _step_for_turn_selects() -> tuple:
    """(model, attnames, SELECT list) of the step, its run, workflow and creator."""
    user_model = cast("type[AbstractUser]", Run._meta.get_field("created_by").related_model)
    # Of the creator, a turn needs the username (injected into tool calls).
    kept = (user_model._meta.pk.name, user_model.USERNAME_FIELD)
    user_rest = tuple(f.name for f in user_model._meta.concrete_fields if f.name not in kept)
    aliased = ((Step, "s", ()), (Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", user_rest))
    return tuple((model, *select_columns(model, alias, without)) for model, alias, without in aliased)


@functools.cache
def _step_for_turn_sql() -> str:
    columns, joins = step_for_turn_columns()
    return f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} WHERE s.id = %(step)s"


@functools.cache
def step_for_turn_columns() -> tuple[str, str]:
    """What a step loaded for its turn selects (the step, its run, workflow
    and creator, then its unread count), and the joins from its run ``r``."""
    parts = _step_for_turn_selects()
    columns = ", ".join(select for _, _, select in parts) + ", " + unread_count_of("s.run_id", "s.step_id")
    return columns, run_joins(parts[3][0])


def run_joins(user_model) -> str:
    """The joins from a run ``r`` to its workflow ``w`` and creator ``u``."""
    return f"JOIN {table(Workflow)} w ON w.id = r.workflow_id LEFT JOIN {table(user_model)} u ON u.id = r.created_by_id"


@functools.cache
def _start_pending_steps_sql(size: int) -> str:
    quote = database().ops.quote_name
    status, started, queued = (quote(column_of(Step, name)) for name in ("status", "started", "turn_queued"))
    return (
        f"UPDATE {table(Step)} SET {status} = %s, {started} = %s, {queued} = %s "
        f"WHERE id IN ({', '.join(['%s'] * size)}) AND {status} = %s RETURNING id"
    )


class Successor(NamedTuple):
    """A step to start with its step_start ``event`` and claim for
    ``owner``'s first turn until ``expires`` (start_and_claim_step), at
    ``now``."""

    pk: int
    event: RuntimeEvent
    owner: str
    expires: datetime
    now: datetime


def prefilter_guess_params() -> dict:
    return {
        "run_running": Run.Status.RUNNING,
        "coordinator": COORDINATOR,
        "completed": Step.Status.COMPLETED,
        "skipped": Step.Status.SKIPPED,
    }


def prefilter_guess_holds(dependencies: str) -> str:
    """A prefilter, never the decision: start_and_claim_step's conditions
    on step ``s`` and its run ``r``, the one definition both databases use.
    The state machine decided to start ``s`` from the run's step rows as a
    worker last read them (scheduling.known_start, eager_successor); these
    check, as the completion is written, that what it decided on still
    holds: the run running, its coordinator neither busy nor holding
    unread mail, every step ``s`` depends on completed or skipped (for its
    condition: agents.core.ready.DONE) (``dependencies``:
    the store's ``dependencies_of_s``). Where one does not, nothing starts
    and the pass after commit decides again."""
    return (
        f"r.status = %(run_running)s AND NOT r.coordinator_busy "
        f"AND NOT EXISTS(SELECT 1 {unread_from('r.id', '%(coordinator)s')}) "
        f"AND NOT EXISTS(SELECT 1 FROM {table(Step)} d WHERE d.run_id = s.run_id "
        f"AND d.step_id IN ({dependencies}) AND d.status NOT IN (%(completed)s, %(skipped)s))"
    )


@functools.cache
def _prefilter_guess_sql(dependencies: str) -> str:
    return (
        f"SELECT 1 FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id "
        f"WHERE s.id = %(step)s AND {prefilter_guess_holds(dependencies)}"
    )
