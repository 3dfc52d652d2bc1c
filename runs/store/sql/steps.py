"""A step loaded and claimed for its turn, and pending steps started."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, cast

from django.conf import settings
from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR
from runs.models import Event, Run, Step, Workflow
from runs.store.sql.events import EVENT_ROWS, events_params, insert_events, insert_events_from
from runs.store.sql.mailboxes import unread_count_of, unread_from
from runs.store.sql.rows import (
    LEASE_ONLY_COMMIT,
    column_of,
    database,
    db_value,
    instances,
    plain_cursor,
    select_columns,
    table,
)
from runs.store.sql.writes import update

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser

# Big and not needed for a turn: the parsed spec is cached per version.
WORKFLOW_TEXT = ("spec", "yaml_text")


def step_for_turn(step_pk: int):
    """Step ``step_pk`` with its run, the run's workflow (but its text and
    stored spec) and the run's creator, as ``select_related`` would load
    them, or None; annotated, as ``annotate()`` would, with ``unread``: how
    many messages its mailbox holds unread (a turn with none skips reading
    them). One query, built once: the ORM takes longer to build this join
    than PostgreSQL takes to run it, on every step turn."""

    vendor = database().vendor
    parts = [(model, names) for model, names, _ in step_for_turn_parts(vendor)]
    with plain_cursor() as cursor:
        cursor.execute(_step_for_turn_sql(vendor), {"step": step_pk})
        row = cursor.fetchone()
    return None if row is None else step_with_run(parts, row)


def claim_step_for_turn(step_pk: int, turn: int, owner: str, expires, now):
    """Take the lease on turn ``turn`` of step ``step_pk`` until ``expires``
    (the step and its run running, the turn the next one, no live lease at
    ``now`` but ``owner``'s), clearing its queued mark (``Step.turn_queued``),
    and return the step loaded as ``step_for_turn`` loads it; None if the
    turn is not this worker's to take. Raises Step.DoesNotExist for a step
    that is gone. One statement on PostgreSQL: on a worker every turn paid a
    round trip to load the step and another to claim it."""
    db = database()
    vendor = db.vendor
    if vendor != "postgresql":
        step = step_for_turn(step_pk)
        if step is None:
            raise Step.DoesNotExist(f"step {step_pk} does not exist")
        if step.run.status != Run.Status.RUNNING or step.status != Step.Status.RUNNING or step.turns != turn - 1:
            return None
        if not claim_step(step_pk, turn, owner, expires, now):
            return None
        # As PostgreSQL's RETURNING gives it back: claimed.
        step.lease_owner, step.lease_expires, step.turn_queued = owner, expires, None
        return step
    parts = [(model, names) for model, names, _ in step_for_turn_parts(vendor)]
    params = {
        "owner": owner,
        "expires": db_value(Step, "lease_expires", expires),
        "step": step_pk,
        "running": Step.Status.RUNNING,
        "previous_turn": turn - 1,
        "run_running": Run.Status.RUNNING,
        "now": db_value(Step, "lease_expires", now),
        "grace": lease_grace(),
    }
    with plain_cursor() as cursor:
        # On its own, the claim commits without waiting for the disk (LEASE_ONLY_COMMIT).
        cursor.execute(_claim_step_for_turn_sql(vendor, lease_only=not db.in_atomic_block), params)
        row = cursor.fetchone()
    if row is None:
        if not Step.objects.filter(pk=step_pk).exists():
            raise Step.DoesNotExist(f"step {step_pk} does not exist")
        return None
    return step_with_run(parts, row)


def claim_step(step_pk: int, turn: int, owner: str, expires, now) -> bool:
    """Take the lease on turn ``turn`` of a step until ``expires``; False if
    another worker holds it at ``now`` (or the turn was taken already)."""
    vendor = database().vendor
    params = [step_pk, Step.Status.RUNNING, turn - 1, owner, db_value(Step, "lease_expires", now)]
    if vendor == "postgresql":
        params.append(lease_grace())
    return bool(
        update(
            Step,
            # Claimed, the turn is no longer queued: the sweeper leaves it to the lease.
            {"lease_owner": owner, "lease_expires": expires, "turn_queued": None},
            f"id = %s AND status = %s AND turns = %s AND {lease_free(vendor, '', '%s', '%s', '%s')}",
            params,
        )
    )


def lease_free(vendor: str, alias: str, owner: str, now: str, grace: str) -> str:
    """The condition under which a claim takes a step's turn (the step's
    columns prefixed with ``alias``; the others placeholders, in this
    order; ``grace`` on PostgreSQL only): no lease, the claimer's own, or
    one that ran out at ``now``. On PostgreSQL one that ran out is taken
    only once the server has been up ``grace`` seconds (a lease period): no
    worker could renew a lease while the server was down, and one that
    lived through the outage gets that long to renew its own (a redelivered
    task would otherwise take its turn a second time). The sweeper's
    leases_lapse waits that long from its own reaching the server again
    too; a claim, made by a task a broker delivered, has no such past."""
    ran_out = f"{alias}lease_expires < {now}"
    if vendor == "postgresql":
        ran_out += f" AND now() - pg_postmaster_start_time() >= {grace} * interval '1 second'"
    return f"({alias}lease_expires IS NULL OR {alias}lease_owner = {owner} OR ({ran_out}))"


def lease_grace() -> float:
    return float(settings.ZENWEB_LEASE_SECONDS)


def step_with_run(parts: list, row):
    (step, run, workflow, user), start = instances(parts, row)
    step.unread = row[start]
    Run._meta.get_field("workflow").set_cached_value(run, workflow)
    Run._meta.get_field("created_by").set_cached_value(run, user)
    Step._meta.get_field("run").set_cached_value(step, run)
    return step


@functools.cache
def _claim_step_for_turn_sql(vendor: str, *, lease_only: bool) -> str:
    columns, joins = step_for_turn_columns(vendor)
    lease_only_commit = f"AND {LEASE_ONLY_COMMIT} " if lease_only else ""
    return (
        f"UPDATE {table(Step)} s SET lease_owner = %(owner)s, lease_expires = %(expires)s, turn_queued = NULL "
        f"FROM {table(Run)} r {joins} "
        "WHERE s.id = %(step)s AND r.id = s.run_id AND s.status = %(running)s AND s.turns = %(previous_turn)s "
        "AND r.status = %(run_running)s "
        f"AND {lease_free(vendor, 's.', '%(owner)s', '%(now)s', '%(grace)s')} "
        f"{lease_only_commit}RETURNING {columns}"
    )


@functools.cache
def step_for_turn_parts(vendor: str) -> tuple:
    """(model, attnames, SELECT list) of the step, its run, workflow and creator."""
    user_model = cast("type[AbstractUser]", Run._meta.get_field("created_by").related_model)
    # Of the creator, a turn needs the username (injected into tool calls).
    kept = (user_model._meta.pk.name, user_model.USERNAME_FIELD)
    user_rest = tuple(f.name for f in user_model._meta.concrete_fields if f.name not in kept)
    aliased = ((Step, "s", ()), (Run, "r", ()), (Workflow, "w", WORKFLOW_TEXT), (user_model, "u", user_rest))
    return tuple((model, *select_columns(model, alias, vendor, without)) for model, alias, without in aliased)


@functools.cache
def _step_for_turn_sql(vendor: str) -> str:
    columns, joins = step_for_turn_columns(vendor)
    return f"SELECT {columns} FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id {joins} WHERE s.id = %(step)s"


def step_for_turn_columns(vendor: str) -> tuple[str, str]:
    """What a step loaded for its turn selects (the step, its run, workflow
    and creator, then its unread count), and the joins from its run ``r``."""
    parts = step_for_turn_parts(vendor)
    columns = ", ".join(select for _, _, select in parts) + ", " + unread_count_of("s.run_id", "s.step_id")
    return columns, run_joins(parts[3][0])


def run_joins(user_model) -> str:
    """The joins from a run ``r`` to its workflow ``w`` and creator ``u``."""
    return f"JOIN {table(Workflow)} w ON w.id = r.workflow_id LEFT JOIN {table(user_model)} u ON u.id = r.created_by_id"


def start_pending_steps(pks: list[int], now) -> set[int]:
    """pending -> running for the steps ``pks``, their first turn marked
    queued at ``now`` (Step.turn_queued); the ids it changed. A step another
    scheduling pass started already is left alone: each starts once."""
    if not pks:
        return set()
    # Padded to a power of two with an id no row has: a statement's text is
    # prepared once per connection on PostgreSQL (rows.plain_cursor). Its
    # parameters stay positional: the IN list is a run of %s as long as the
    # padding.
    size = 1 << (len(pks) - 1).bit_length()
    when = db_value(Step, "started", now)
    params = [Step.Status.RUNNING, when, when, *pks, *[0] * (size - len(pks)), Step.Status.PENDING]
    with plain_cursor() as cursor:
        cursor.execute(_start_pending_steps_sql(size), params)
        return {row[0] for row in cursor.fetchall()}


@functools.cache
def _start_pending_steps_sql(size: int) -> str:
    quote = database().ops.quote_name
    status, started, queued = (quote(column_of(Step, name)) for name in ("status", "started", "turn_queued"))
    return (
        f"UPDATE {table(Step)} SET {status} = %s, {started} = %s, {queued} = %s "
        f"WHERE id IN ({', '.join(['%s'] * size)}) AND {status} = %s RETURNING id"
    )


def start_steps(run_id: int, starts: list[tuple[int, RuntimeEvent]], now) -> tuple[list[int], int | None]:
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
    if database().vendor != "postgresql":
        with transaction.atomic():
            started = start_pending_steps([pk for pk, _ in starts], now)
            events = [(event, now) for pk, event in starts if pk in started]
            seqs = insert_events(run_id, events) if events else [None]
        return [pk for pk, _ in starts if pk in started], seqs[-1]
    params = events_params(run_id, [(event, now) for _, event in starts])
    params |= {
        "steps": [pk for pk, _ in starts],
        "running": Step.Status.RUNNING,
        "pending": Step.Status.PENDING,
        "now": now,
    }
    with plain_cursor() as cursor:
        cursor.execute(_start_steps_sql(), params)
        started, last_seq = cursor.fetchone()
    return sorted(started or (), key=[pk for pk, _ in starts].index), last_seq


@functools.cache
def _start_steps_sql() -> str:
    """start_steps on PostgreSQL: the steps started (a conditional UPDATE),
    the events of those kept from the JSON document of them all (one per
    step, in order, joined on step_id), their count added to the run's
    counter (which locks the run row, as insert_events does) and the events
    numbered after it."""
    quote = database().ops.quote_name
    status, started, queued, step_id = (
        quote(column_of(Step, name)) for name in ("status", "started", "turn_queued", "step_id")
    )
    return (
        f"WITH started AS (UPDATE {table(Step)} SET {status} = %(running)s, {started} = %(now)s, "
        f"{queued} = %(now)s WHERE id = ANY(%(steps)s) AND {status} = %(pending)s RETURNING id, {step_id}), "
        "kept AS (SELECT e.type, e.step_id, e.data, e.created, row_number() OVER (ORDER BY e.n) AS n "
        f"FROM {EVENT_ROWS} JOIN started s ON s.{step_id} = e.step_id), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + (SELECT count(*) FROM kept) "
        "WHERE id = %(run)s AND EXISTS (SELECT 1 FROM kept) RETURNING last_event_seq), "
        f"inserted AS ({insert_events_from('bumped', 'kept e', '(SELECT count(*) FROM kept)')}) "
        f"SELECT (SELECT array_agg(id) FROM started), (SELECT max({quote(column_of(Event, 'seq'))}) "
        "FROM inserted)"
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


def start_and_claim_step(run_id: int, successor: Successor) -> tuple[Step, int] | None:
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
    vendor = database().vendor
    if vendor != "postgresql":
        with transaction.atomic():
            if not _may_start(run_id, successor.pk):
                return None
            started, last_seq = start_steps(run_id, [(successor.pk, successor.event)], successor.now)
            step = (
                claim_step_for_turn(successor.pk, 1, successor.owner, successor.expires, successor.now)
                if started
                else None
            )
        return None if step is None or last_seq is None else (step, last_seq)
    with plain_cursor() as cursor:
        cursor.execute(*start_and_claim_statement(run_id, successor))
        return started_and_claimed(cursor.fetchone())


def start_and_claim_statement(
    run_id: int, successor: Successor, *, after: tuple[int, datetime] | None = None
) -> tuple[str, dict]:
    """start_and_claim_step's statement and parameters (PostgreSQL): for a
    caller that sends it with others (turns.write_last_turn). ``after``: a
    step (its id) and the ``finished`` time (as the database takes it) a
    write earlier in the same transaction gave it: the step starts only if
    that write happened."""
    params = events_params(run_id, [(successor.event, successor.now)])
    params |= {
        **_may_start_params(),
        "step": successor.pk,
        "pending": Step.Status.PENDING,
        "running": Step.Status.RUNNING,
        "owner": successor.owner,
        "expires": db_value(Step, "lease_expires", successor.expires),
        "now": db_value(Step, "started", successor.now),
    }
    if after is not None:
        params |= {"after_step": after[0], "after_finished": after[1]}
    return _start_and_claim_sql(database().vendor, after is not None), params


def started_and_claimed(row) -> tuple[Step, int] | None:
    """What start_and_claim_step returns, from its statement's row."""
    if row is None:
        return None
    parts = [(model, names) for model, names, _ in step_for_turn_parts(database().vendor)]
    return step_with_run(parts, row[:-1]), row[-1]


def _may_start(run_id: int, step_pk: int) -> bool:
    """start_and_claim_step's conditions on the run and the step's
    dependencies (the step's own status is its UPDATE's), on SQLite."""
    params = {"step": step_pk, **_may_start_params()}
    with plain_cursor() as cursor:
        cursor.execute(_may_start_sql(database().vendor), params)
        return cursor.fetchone() is not None


def _may_start_params() -> dict:
    return {
        "run_running": Run.Status.RUNNING,
        "coordinator": COORDINATOR,
        "completed": Step.Status.COMPLETED,
    }


def _may_start_where(vendor: str) -> str:
    """start_and_claim_step's conditions on step ``s`` and its run ``r``,
    the one definition both databases use: the run running, its
    coordinator neither busy nor holding unread mail, every step ``s``
    depends on completed."""
    depends_on = (
        "SELECT jsonb_array_elements_text(s.depends_on)"
        if vendor == "postgresql"
        else "SELECT value FROM json_each(s.depends_on)"
    )
    return (
        f"r.status = %(run_running)s AND NOT r.coordinator_busy "
        f"AND NOT EXISTS(SELECT 1 {unread_from('r.id', '%(coordinator)s')}) "
        f"AND NOT EXISTS(SELECT 1 FROM {table(Step)} d WHERE d.run_id = s.run_id "
        f"AND d.step_id IN ({depends_on}) AND d.status <> %(completed)s)"
    )


@functools.cache
def _may_start_sql(vendor: str) -> str:
    return (
        f"SELECT 1 FROM {table(Step)} s JOIN {table(Run)} r ON r.id = s.run_id "
        f"WHERE s.id = %(step)s AND {_may_start_where(vendor)}"
    )


@functools.cache
def _start_and_claim_sql(vendor: str, after_write: bool = False) -> str:
    """start_and_claim_step on PostgreSQL: the step started and claimed (a
    conditional UPDATE returning its row), the run's counter bumped (which
    locks the run row, as insert_events does), its event numbered after it,
    and the step read back with its run, workflow, creator and unread
    count, as the claim reads them. ``after_write``: see start_and_claim_statement."""
    columns, joins = step_for_turn_columns(vendor)
    seq = database().ops.quote_name(column_of(Event, "seq"))
    after = (
        f"AND EXISTS(SELECT 1 FROM {table(Step)} f WHERE f.id = %(after_step)s AND f.finished = %(after_finished)s) "
        if after_write
        else ""
    )
    return (
        f"WITH s AS (UPDATE {table(Step)} s SET status = %(running)s, started = %(now)s, lease_owner = %(owner)s, "
        f"lease_expires = %(expires)s, turn_queued = NULL FROM {table(Run)} r "
        "WHERE s.id = %(step)s AND s.status = %(pending)s AND r.id = s.run_id "
        f"AND {_may_start_where(vendor)} {after}RETURNING s.*), "
        f"bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s "
        "WHERE id = %(run)s AND EXISTS (SELECT 1 FROM s) RETURNING last_event_seq), "
        f"inserted AS ({insert_events_from('bumped')}) "
        f"SELECT {columns}, (SELECT max({seq}) FROM inserted) FROM s JOIN {table(Run)} r ON r.id = s.run_id {joins}"
    )
