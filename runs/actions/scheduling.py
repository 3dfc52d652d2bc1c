"""Applying the state machine's decisions (agents/core/machine.py) to a run:
which steps start, when the coordinator wakes.

``schedule`` runs after every step's end (and after a run starts, a
coordinator goes idle, a loop moves on, a resume ends). After a completion
it decides on the finished step's dependents and, when no cap can be passed
by starts that race (agents.core.machine.caps_cannot_bind), starts them
without the run's lock: a conditional UPDATE (pending -> running) starts
each step once. Otherwise it decides again under the run's lock.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Literal, NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.core import machine
from agents.core.decisions import FailStep, SkipStep
from agents.events import Event as RuntimeEvent
from agents.events.run_events import StepStart
from agents.spec import WorkflowSpec
from runs import queue
from runs.actions.catalog import spec_of
from runs.actions.not_started import not_started
from runs.actions.run_states import coordinator_plans_first, decided_from_rows, run_state, spawns_workers
from runs.models import Run, Step
from runs.store.events import NoticeAfterCommit
from runs.store.sql import StepRow, Successor, store
from runs.store.wakes import request_coordinator_wake


class EagerTurn(NamedTuple):
    """The first turn of ``step``, which this worker takes itself: the step
    started with its lease on that turn, loaded for it. ``outputs``: those
    of the steps it may depend on, known to the worker (step id -> output):
    its prompt, when it depends on them only, reads no output back.
    ``rows``: the run's step rows as the worker last read them, this step
    running: what it guesses the step's successor from (eager_successor)."""

    step: Step
    outputs: dict[str, str]
    rows: list[StepRow] | None = None

    @property
    def step_pk(self) -> int:
        return self.step.pk


class EagerWake(NamedTuple):
    """A wake of run ``run_id``'s coordinator that this worker runs itself:
    requested, and marked queued (Run.wake_queued), but sent to no broker."""

    run_id: int


# What a worker does next itself instead of queueing it (eager continuation).
Eager = EagerTurn | EagerWake


def schedule(
    run_id: int,
    state: tuple | None = None,
    finished: Step | None = None,
    *,
    worker: str | None = None,
    steps: list[StepRow] | None = None,
    locked: bool = False,
    idle: bool = False,
) -> Eager | None:
    """Start every pending step whose dependencies completed, or wake the
    coordinator (to plan first, or to finish once every step is done).

    ``state``: the run's flags as stores.schedule_state gives them, read
    under the run's lock by the transaction that just committed (else read
    here). ``finished``: the step whose completion this follows, if one did.
    ``steps``: the run's step rows, read by that transaction too (when
    decided_from_rows said so), else read here if needed.

    ``worker``: the worker that asks (it just committed ``finished``'s
    completion, or is starting the run), which does what follows itself
    when it is one thing (eager continuation, as Temporal dispatches an
    activity eagerly), and returns it: when exactly one step starts, the
    step starts with that worker's lease on its first turn (EagerTurn); a
    worker that dies before recording the turn leaves a lease that runs
    out, and the sweeper hands the turn to another worker, as it does any
    turn whose worker died. When the coordinator is to wake, the wake is
    requested but not queued (EagerWake); a worker that dies before the
    wake starts leaves it marked queued, and the sweeper queues it.

    ``locked``: the caller holds the run's lock, in the transaction that
    completed ``finished``, and read ``state`` and ``steps`` under it (None
    when no pending step may start): decided and applied there, without a
    pass of its own after commit.

    ``idle``: the coordinator has just gone idle (machine.CoordinatorIdle).
    """
    # This runs after every step's end. Most find no pending step that may
    # start (a fan-out starts all its steps at once; a report waits for a
    # loop's last iteration): they read the run's flags in one query,
    # without the run's lock, instead of every step of the run.
    state = state or store().schedule_state(run_id)
    if state is None:
        return None
    status, busy, has_mail, may_start, _, workflow_id, created = state
    spec = spec_of(workflow_id, created)
    happened = _happened(None if finished is None else finished.step_id, idle)
    # A prefilter: the step rows are read, and decided on, only where a
    # pending step passed schedule_state's (its dependencies done) and the
    # coordinator holds nothing back (decide would start nothing).
    if not (may_start and status == Run.Status.RUNNING and not (busy or has_mail)):
        return _wake_if_due(run_id, spec, state, happened, worker)
    if locked and steps is not None:
        return _decide_locked(run_id, spec, steps, happened, worker) or None
    started: EagerTurn | Literal[0] | None = None
    if finished is not None and decided_from_rows(spec, finished):
        started = _start_without_lock(run_id, spec, finished.step_id, steps, worker)
    if started is None:
        started = _start_ready_steps(run_id, happened, worker)
    return started or None


def _wake_if_due(
    run_id: int, spec: WorkflowSpec, state: tuple, happened: machine.Happening, worker: str | None
) -> EagerWake | None:
    """Where no step may start: the coordinator's wake, if the state machine
    decides one on the run's flags (``state``, as schedule reads it) without
    its step rows. Reading without the lock is enough: every step's end
    commits before it calls this, so the last one to end sees all done.
    With ``worker``, the wake is requested but left to that worker."""
    status, busy, has_mail, _, all_steps_done, _, _ = state
    holding = status != Run.Status.RUNNING or busy or has_mail
    plans = not (holding or all_steps_done) and coordinator_plans_first(run_id, spec)
    coordinator = machine.CoordinatorState(busy=busy, has_mail=has_mail, plans_first=plans)
    flags = machine.RunState(status, coordinator=coordinator, others_unfinished=not all_steps_done)
    if any(isinstance(d, machine.WakeCoordinator) for d in machine.decide(flags, happened)):
        if worker is not None:
            return None if store().request_wake(run_id) else EagerWake(run_id)
        with transaction.atomic():
            request_coordinator_wake(run_id)
    return None


def do_schedule_run_of(step_pk: int) -> None:
    """Schedule the run of step ``step_pk`` (see schedule): for a task that
    cannot tell whether an earlier attempt got that far."""
    run_id = Step.objects.filter(pk=step_pk).values_list("run_id", flat=True).first()
    if run_id is not None:
        schedule(run_id)


def _start_without_lock(
    run_id: int, spec: WorkflowSpec, finished: str, rows: list[StepRow] | None, worker: str | None
) -> EagerTurn | Literal[0] | None:
    """Decide on what ``finished`` completing unblocks from one read of the
    run's steps (``rows``, or read here), and start it, if no cap can bind.
    None if the run's lock is needed; else 0, or (``worker``, one step
    started) the step started with its first turn claimed for that worker.
    Only where decided_from_rows holds."""
    if rows is None:
        rows = store().step_rows(run_id)
    state = run_state(Run.Status.RUNNING, rows, spec, machine.CoordinatorState())
    decisions = machine.decide(state, machine.StepEnded(finished, Step.Status.COMPLETED))
    start = next((d for d in decisions if isinstance(d, machine.StartSteps)), None)
    if start is None:
        # Nothing ready (its dependents wait for other steps), or the run's
        # other decisions need its lock.
        return None if decisions else 0
    if start.needs_run_lock:
        return None
    return _start(run_id, rows, start.step_ids, worker) or 0


def _happened(finished: str | None, idle: bool) -> machine.Happening:
    """What a pass of ``schedule`` follows: ``finished`` completing, the
    coordinator going idle, or (neither) steps that changed otherwise."""
    if finished is not None:
        return machine.StepEnded(finished, Step.Status.COMPLETED)
    return machine.CoordinatorIdle() if idle else machine.StepsChanged()


def _start_ready_steps(run_id: int, happened: machine.Happening, worker: str | None = None) -> EagerTurn | None:
    """A scheduling pass under the run's lock; with ``worker``, the step
    started with its first turn claimed for it, if exactly one started."""
    # Nothing here is rolled back on its own: inside a caller's transaction, no savepoint.
    with transaction.atomic(savepoint=False):
        # Read after the lock: what its earlier holders committed.
        locked = store().locked_schedule_state(run_id)
        if locked is None:
            return None
        (status, busy, has_mail, _, _, workflow_id, created), rows = locked
        coordinator = machine.CoordinatorState(busy=busy, has_mail=has_mail)
        return _decide_locked(run_id, spec_of(workflow_id, created), rows, happened, worker, status, coordinator)


def _decide_locked(
    run_id: int,
    spec: WorkflowSpec,
    rows: list[StepRow],
    happened: machine.Happening,
    worker: str | None,
    status: str = Run.Status.RUNNING,
    coordinator: machine.CoordinatorState | None = None,
) -> EagerTurn | None:
    """The state machine's decision on the run's step ``rows`` (its
    ``status`` and ``coordinator`` read with them), read under its lock,
    which the caller holds: applied (see apply_decisions)."""
    coordinator = coordinator or machine.CoordinatorState()
    if status == Run.Status.RUNNING and not (coordinator.busy or coordinator.has_mail):
        # Whether it plans first is read only where decide weighs it.
        coordinator = replace(coordinator, plans_first=coordinator_plans_first(run_id, spec))
    state = run_state(status, rows, spec, coordinator, run_id)
    return apply_decisions(run_id, rows, machine.decide(state, happened), worker)


def schedule_start(run_id: int, spec: WorkflowSpec, rows: list[StepRow], worker: str | None) -> EagerTurn | None:
    """What a run's start decides (machine.RunStarted), inside the start's
    transaction, which holds the run's lock, from the step ``rows`` it has
    just created: a new run's coordinator is not busy, has no mail, and
    has not planned yet; nothing need be read back. With ``worker``, the
    step started with its first turn claimed for it, if exactly one starts."""
    coordinator = machine.CoordinatorState(plans_first=spawns_workers(spec))
    state = run_state(Run.Status.RUNNING, rows, spec, coordinator, run_id)
    return apply_decisions(run_id, rows, machine.decide(state, machine.RunStarted()), worker)


def apply_decisions(run_id: int, rows: list[StepRow], decisions: tuple, worker: str | None = None) -> EagerTurn | None:
    """Apply the state machine's ``decisions`` on a run whose lock is held,
    decided from its step ``rows``: start steps, request the coordinator's
    wake, skip (or fail) a step whose condition is not true and stop what
    that failure stops. With ``worker``, the step started with its first turn claimed for
    it, if exactly one starts."""
    claimed = None
    for decision in decisions:
        if isinstance(decision, machine.StartSteps):
            claimed = _start(run_id, rows, decision.step_ids, worker) or claimed
        elif isinstance(decision, machine.WakeCoordinator):
            request_coordinator_wake(run_id)
        elif isinstance(decision, SkipStep | FailStep | machine.StopSteps):
            not_started(run_id, decision)
    return claimed


def _start(run_id: int, rows: list[StepRow], step_ids: tuple[str, ...], worker: str | None) -> EagerTurn | None:
    """Start the steps ``step_ids`` of ``rows``: one, with ``worker``, with
    its first turn claimed for that worker (returned, loaded for the turn);
    else with their first turns queued."""
    by_id = {row.step_id: row for row in rows}
    if worker and len(step_ids) == 1:
        started = _start_claimed(run_id, successor(by_id[step_ids[0]], worker))
        return None if started is None else EagerTurn(started, {}, running(rows, started.step_id))
    _start_steps(run_id, [by_id[step_id] for step_id in step_ids])
    return None


def _start_steps(run_id: int, steps: list) -> None:
    """Start ``steps``: each pending one becomes running (a conditional
    UPDATE: a step another pass started is left alone) with its step_start
    event, in one transaction (one statement on PostgreSQL: a fan-out starts
    a hundred at once), its first turn marked queued (Step.turn_queued: the
    sweeper queues it again if no worker takes it). ``steps``: rows with
    pk, step_id and agent.

    One step's turn is a task of its own. The first turns of several are
    the run's queue, taken by take_queued_turn: after commit one task
    (take_queued_turns) takes them one after another and asks for another
    worker while more wait, and that one for another, as long as workers
    are free. A fan-out of 500 steps costs the broker a task per worker
    that joins, not one per step (docs/concurrency.md)."""
    starts = [(step.pk, _step_start(step)) for step in steps]
    started, last_seq = store().start_steps(run_id, starts, timezone.now())
    if last_seq is not None:
        NoticeAfterCommit(run_id).wrote(last_seq)
    if len(started) == 1:
        queue.send_after_commit(queue.RUN_STEP_TURN, started[0], 1)
    elif started:
        queue.send_after_commit(queue.TAKE_QUEUED_TURNS, run_id)


def take_queued_turn(run_id: int, worker: str, after: int = 0) -> tuple[EagerTurn | None, bool]:
    """The first turn of run ``run_id``'s first step (past step ``after``,
    the one ``worker`` took last) whose first turn waits queued (started by
    _start_steps; the run running), claimed for ``worker`` and loaded for
    it, or None; and whether another waits."""
    now = timezone.now()
    expires = now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    step, more = store().claim_queued_first_turn(run_id, worker, expires, now, after)
    return (None if step is None else EagerTurn(step, {})), more


def _start_claimed(run_id: int, step: Successor) -> Step | None:
    """Start ``step`` with its owner's lease on its first turn, in one
    statement on PostgreSQL; the step loaded for that turn, or None if
    another pass started it (or the run stopped)."""
    started = store().start_and_claim_step(run_id, step)
    if started is None:
        return None
    loaded, last_seq = started
    NoticeAfterCommit(run_id).wrote(last_seq)
    return loaded


def successor(step: StepRow, owner: str) -> Successor:
    """``step`` to be started with ``owner``'s lease on its first turn."""
    now = timezone.now()
    return Successor(step.pk, _step_start(step), owner, now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS), now)


def running(rows: list[StepRow], step_id: str) -> list[StepRow]:
    """``rows`` with step ``step_id`` running."""
    return [row._replace(status=Step.Status.RUNNING) if row.step_id == step_id else row for row in rows]


def same_but(known: list[StepRow], fresh: list[StepRow], *changed: str) -> bool:
    """Whether the ``fresh`` rows of a run hold what the ``known`` ones did
    (the same steps, statuses and resumes) but for steps ``changed``: what
    the state machine decided from ``known`` stands."""

    def view(rows: list[StepRow]) -> list[tuple]:
        return [(row.step_id, row.status, row.resuming) for row in rows if row.step_id not in changed]

    return view(known) == view(fresh)


def known_start(spec: WorkflowSpec, rows: list[StepRow] | None, finished: str) -> machine.StartSteps | None:
    """What the state machine starts after ``finished`` completes, decided
    from ``rows`` (the run's steps as the worker last read them): a guess,
    made before the completion is written, of what its write will decide
    (None: nothing, or no rows to guess from). Only where decided_from_rows
    holds for ``finished`` (else the rows, read too long ago, may lack
    steps added since, or a cap may bind).

    A guess of one step that no cap can bind (eager_successor) is started
    and claimed with the write; a guess that needs the run's lock (a cap
    binds: more ready steps than room) has the write decide under the lock
    it takes, before it commits (schedule with ``locked``)."""
    if rows is None:
        return None
    done = [row._replace(status=Step.Status.COMPLETED) if row.step_id == finished else row for row in rows]
    state = run_state(Run.Status.RUNNING, done, spec, machine.CoordinatorState())
    decisions = machine.decide(state, machine.StepEnded(finished, Step.Status.COMPLETED))
    return next((d for d in decisions if isinstance(d, machine.StartSteps)), None)


def eager_successor(rows: list[StepRow], start: machine.StartSteps | None) -> StepRow | None:
    """The one step of ``rows`` that ``start`` (known_start's guess) starts,
    if it is one step and no cap can bind: the write of the completion
    checks the guess (start_and_claim_step's conditions, under the run's
    lock) before it starts the step."""
    match start:
        case machine.StartSteps(step_ids=(step_id,), needs_run_lock=False):
            return next(row for row in rows if row.step_id == step_id)
    return None


def _step_start(step) -> RuntimeEvent:
    return RuntimeEvent.of(StepStart(agent=step.agent), step.step_id)
