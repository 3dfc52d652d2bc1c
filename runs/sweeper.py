"""The sweeper: every worker runs ``do_sweep`` every ``ZENWEB_SWEEP_SECONDS``
(``Sweeper``) to find work that waits for a task that will not come, and
queue it again.

Every state that waits for a task has a deadline here: the leases of a
worker known dead (``release_dead_workers``, also at the sweeper's start and
every ``ZENWEB_HEARTBEAT_SECONDS`` between sweeps) and a turn whose lease
expired (its worker died) go to another worker at once (the latter not within one
lease period of the database server's start, or of the sweeper reaching it
again: ``leases_lapse``); a run still ``pending``, a coordinator wake and a
step turn that were queued ``ZENWEB_REQUEUE_AFTER`` seconds ago and not
taken (the broker lost their task) are queued again; tasks whose publish
failed (runs/outbox.py) are sent again. It also fails runs past their
budget or timeout and steps past their step timeout, lapses questions
nobody answered in time (runs/actions/questions.py), resumes runs silent
for ``ZENWEB_RESUME_AFTER`` seconds, marks runs that made no progress
for ``ZENWEB_STUCK_AFTER`` seconds and unmounts the workspaces of runs that
ended (runs/actions/retention.py). Every change is a conditional UPDATE,
and every task it queues does nothing if the work was not lost after all:
many workers sweep at once without harm.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import redis
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Max, Q
from django.utils import timezone
from redis.exceptions import RedisError

from agents.events import Event as RuntimeEvent
from agents.events.run_events import LeaseExpired, RunStuck
from agents.spec.lookup import own_timeouts
from runs import leases, outbox, queue
from runs.actions.catalog import spec_of
from runs.actions.deadlines import do_enforce_budget, do_enforce_step_timeouts, has_run_limits
from runs.actions.questions import do_lapse_expired_questions
from runs.actions.recovery import do_resume_run
from runs.actions.retention import release_ended_workspaces
from runs.actions.tool_tasks import sweep_tool_calls
from runs.models import Event, Run, Step
from runs.store.sql import store
from runs.store.sql.errors import connection_lost, first_line
from runs.store.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

# Events the sweeper itself writes: they are not progress of the run.
BOOKKEEPING_EVENTS = ("run_resumed", "run_stuck", "lease_expired")


def expired_leases(now):
    """Running steps whose turn's lease ran out before ``now``: found by the
    step_running index, which leaves the lease columns unindexed (see Step)."""
    # No ordering: Step's default (its run's creation, then position) joins every run.
    return Step.objects.filter(status=Step.Status.RUNNING, lease_expires__lt=now).exclude(lease_owner="").order_by()


def leases_lapse(up_for: float | None, reached_for: float = math.inf) -> bool:
    """Whether a lease that ran out is lost with its worker: the database
    server up for ``up_for`` seconds (database_up_for; None: SQLite, a file
    of this process, never away) and the sweeper that asks reaching it for
    ``reached_for`` seconds (since its start or its last lost connection).
    Not within one lease period of either: no worker could renew a lease
    while the server was down or coming back, and a worker that lived
    through the outage gets that long to renew its leases. Else a tool call
    that finished during the outage, its result not yet stored, would run
    again on another worker. The server's uptime alone is not enough: it
    counts from the server's start, and its recovery after a crash can take
    longer than a lease: it has then been up a lease period when it first
    lets a worker in (tests/services/test_postgres_crash.py)."""
    if up_for is None:
        return True
    return min(up_for, reached_for) >= settings.ZENWEB_LEASE_SECONDS


def release_dead_workers(reached_for: float = math.inf) -> int:
    """Hand on at once the leases of processes known dead
    (``leases.dead_owners``), without waiting for them to run out: their
    step turns and tool calls are queued again (a call lost MAX_ATTEMPTS
    times fails). One statement when none died; every worker runs it every
    ZENWEB_HEARTBEAT_SECONDS. Returns how many leases it handed on."""
    gone, silent = leases.dead_owners(lambda: _beats_trusted(reached_for))
    if not gone and not silent:
        return 0
    now = timezone.now()
    owners = Q()
    for name in gone:
        owners |= Q(lease_owner__startswith=f"{name}:")
    # A silent process beats first once it holds a lease, so a lease taken
    # or renewed since its beat went stale is a sign of life.
    quiet_since = now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS - leases.heartbeat_dead_after())
    for name in silent:
        owners |= Q(lease_owner__startswith=f"{name}:", lease_expires__lte=quiet_since)
    released = _expire_leases(now, owners) + sweep_tool_calls(now, owners)
    if released:
        log.warning("handed on %d lease(s) of dead worker processes: %s", released, ", ".join(gone + silent))
    leases.forget(gone + silent)
    return released


def _beats_trusted(reached_for: float) -> bool:
    """Whether a stale beat means a dead process: the database server and
    this sweeper have been up long enough for every live one to beat again
    since (as leases_lapse, for the beats' deadline)."""
    up_for = store().database_up_for()
    return min(math.inf if up_for is None else up_for, reached_for) >= leases.heartbeat_dead_after()


def do_sweep(reached_for: float = math.inf) -> dict[str, int]:
    """One sweep (see the module's docstring); how many of each thing it
    did, in the order it did them. ``reached_for``: how long this sweeper
    has reached the database (``leases_lapse``). Safe to run in many
    workers at once: every change is a conditional UPDATE."""
    now = timezone.now()
    lapse = leases_lapse(store().database_up_for(), reached_for)
    return {
        "dead_workers": release_dead_workers(reached_for) if settings.ZENWEB_HEARTBEAT_SECONDS > 0 else 0,
        "expired": _expire_leases(now) if lapse else 0,
        "after_broker_restart": _recover_after_broker_restart(),
        "sent_again": outbox.send_unsent(),
        "starts_requeued": _requeue_pending_starts(now),
        "wakes_requeued": _requeue_lost_wakes(now),
        "turns_requeued": _requeue_lost_turns(now),
        "tool_calls": sweep_tool_calls(now) if lapse else 0,
        "questions_lapsed": do_lapse_expired_questions(),
        **_enforce_limits(),
        "resumed": _resume_silent(now),
        "stuck": _mark_stuck(now),
        "workspaces_released": release_ended_workspaces(now),
    }


def _expire_leases(now, owners: Q | None = None) -> int:
    """Hand each step turn whose lease ran out before ``now`` (its worker
    died), or held by ``owners`` (dead), to the queue again; how many."""
    expired = 0
    if owners is None:
        held = expired_leases(now)
    else:
        held = Step.objects.filter(owners, status=Step.Status.RUNNING).exclude(lease_owner="").order_by()
    for step in held:
        with transaction.atomic(), UnitOfWork(step.run_id) as uow:
            store().lock_run(step.run_id)
            # Neither renewed nor taken since it was read.
            same = Q(lease_owner=step.lease_owner, lease_expires=step.lease_expires)
            if not Step.objects.filter(same, pk=step.pk).update(lease_owner="", lease_expires=None, turn_queued=now):
                continue
            expired_event = LeaseExpired(owner=step.lease_owner, turn=step.turns + 1)
            uow.sink.emit(RuntimeEvent.of(expired_event, step.step_id))
            queue.send_after_commit(queue.RUN_STEP_TURN, step.pk, step.turns + 1)
            expired += 1
    return expired


# A key zenweb keeps on the broker: gone, the broker lost its data (a Redis
# restarted without persistence, a failover to an empty replica) and every
# queued task with it.
BROKER_MARK = "zenweb:broker-mark"


def _recover_after_broker_restart() -> int:
    """The broker lost its data: resume the running runs and queue the
    pending runs' starts now, seconds after it is back, instead of after
    ZENWEB_RESUME_AFTER. The sweeper that sets the mark again does it (once
    per loss; also once on a new broker, which does no harm). Returns how
    many runs it nudged."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://")):
        return 0
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        if not client.set(BROKER_MARK, timezone.now().isoformat(), nx=True):
            return 0
    except RedisError:
        return 0  # still away: the next sweep looks again
    log.warning("the broker has lost its data (restarted without persistence?): resuming live runs")
    nudged = 0
    for pk in Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", flat=True):
        do_resume_run(pk, "the broker restarted: its queued tasks may be lost")
        nudged += 1
    for pk in Run.objects.filter(status=Run.Status.PENDING).values_list("pk", flat=True):
        queue.send(queue.START_RUN, pk)
        nudged += 1
    return nudged


def _requeue_pending_starts(now) -> int:
    """Runs still pending ZENWEB_REQUEUE_AFTER seconds after they were
    created (or last queued again) get their start task queued again: the
    broker may have lost it (a Redis restart without persistence). Each is
    marked stuck with why, until it starts (do_start_run clears the mark)."""

    after = settings.ZENWEB_REQUEUE_AFTER
    if after <= 0:
        return 0
    since = now - timedelta(seconds=after)
    overdue = Run.objects.filter(status=Run.Status.PENDING, created__lt=since).filter(
        Q(start_requeued__isnull=True) | Q(start_requeued__lt=since)
    )
    requeued = 0
    for run in overdue.only("pk", "created"):
        unsent = outbox.unsent_start_error(run.pk)
        if unsent:
            reason = f"not started: its start could not be queued ({unsent}); it is sent when the broker answers"
        else:
            waited = (now - run.created).total_seconds()
            reason = f"not started {waited:.0f}s after it was created: no worker took its start task, queued again"
        if Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(
            start_requeued=now, stuck_reason=reason[:300]
        ):
            if not unsent:
                queue.send(queue.START_RUN, run.pk)
            requeued += 1
    return requeued


def _requeue_lost_wakes(now) -> int:
    """A coordinator wake queued ZENWEB_REQUEUE_AFTER seconds ago that never
    started (its task lost with the broker): its mark (Run.wake_queued)
    holds other requests back, so nothing else would queue one. Queue it
    again; a wake that was only slow finds the coordinator busy and leaves."""

    after = settings.ZENWEB_REQUEUE_AFTER
    if after <= 0:
        return 0
    since = now - timedelta(seconds=after)
    requeued = 0
    lost = Run.objects.filter(status=Run.Status.RUNNING, coordinator_busy=False, wake_queued__lt=since)
    for pk, queued in lost.values_list("pk", "wake_queued"):
        if Run.objects.filter(pk=pk, coordinator_busy=False, wake_queued=queued).update(wake_queued=now):
            queue.send(queue.WAKE_COORDINATOR, pk)
            requeued += 1
    return requeued


def _requeue_lost_turns(now) -> int:
    """A step turn queued ZENWEB_REQUEUE_AFTER seconds ago that no worker
    claimed (its task lost with the broker) is queued again. Only a step
    marked queued (Step.turn_queued, set with whatever queues its turn and
    cleared by the claim) has one: a step waiting for a tool task, a child
    run or a person has no mark and gets no turn before its result comes. A
    task that was only slow finds the turn taken and leaves."""

    after = settings.ZENWEB_REQUEUE_AFTER
    if after <= 0:
        return 0
    since = now - timedelta(seconds=after)
    # Found by step_running, like expired leases; no live lease: a claimed turn is its worker's.
    lost = (
        Step.objects.filter(status=Step.Status.RUNNING, run__status=Run.Status.RUNNING, turn_queued__lt=since)
        .filter(Q(lease_expires__isnull=True) | Q(lease_expires__lt=now))
        .order_by()
    )
    requeued = 0
    for pk, run_id, step_id, turns, queued in lost.values_list("pk", "run_id", "step_id", "turns", "turn_queued"):
        if Step.objects.filter(pk=pk, status=Step.Status.RUNNING, turns=turns, turn_queued=queued).update(
            turn_queued=now
        ):
            waited = (now - queued).total_seconds()
            log.warning(
                "run %s: turn %d of step %s was queued %.0fs ago and no worker took it: queued again",
                run_id,
                turns + 1,
                step_id,
                waited,
            )
            queue.send(queue.RUN_STEP_TURN, pk, turns + 1)
            requeued += 1
    return requeued


def _enforce_limits() -> dict[str, int]:
    """Wall-time budgets and timeouts run out while nothing happens too: a
    run waits, a step's model call goes on (the worker's late turn then finds
    its step failed, or its run ended, and records nothing)."""
    counts = {"over_budget": 0, "steps_timed_out": 0}
    running = Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", "workflow_id", "workflow__created")
    for pk, workflow_id, created in list(running):
        options = spec_of(workflow_id, created).options
        if has_run_limits(options) and do_enforce_budget(pk):
            counts["over_budget"] += 1
        else:
            own = own_timeouts(spec_of(workflow_id, created))
            counts["steps_timed_out"] += do_enforce_step_timeouts(pk, options, own)
    return counts


def _resume_silent(now) -> int:
    """Runs with no event for ZENWEB_RESUME_AFTER seconds get their work
    re-enqueued once per silence (the run_resumed event is itself progress):
    this recovers tasks a broker lost (a Redis restart without persistence)."""
    after = settings.ZENWEB_RESUME_AFTER
    if after <= 0:
        return 0
    since = now - timedelta(seconds=after)
    silent = (
        Run.objects.filter(status=Run.Status.RUNNING)
        # Waiting for a person or a child run is not being stuck.
        .exclude(approvals__status="pending")
        .exclude(tool_calls__status="waiting")
        .annotate(
            last=Max("events__created", filter=~Q(events__type__in=BOOKKEEPING_EVENTS)),
            nudged=Max("events__created", filter=Q(events__type="run_resumed")),
        )
        .filter(last__lt=since)
        .filter(Q(nudged__isnull=True) | Q(nudged__lt=since))
    )
    resumed = 0
    for run in silent:
        do_resume_run(run.pk, f"no progress for {after:g}s")
        resumed += 1
    return resumed


def _mark_stuck(now) -> int:
    """Running runs whose last event is older than ZENWEB_STUCK_AFTER get a
    stuck_reason (and an event) once; it clears when they move again."""
    limit = now - timedelta(seconds=settings.ZENWEB_STUCK_AFTER)
    # A run whose step waits for a person's answer (ask_person) is waiting, not stuck: its wait times out on its own.
    running = (
        Run.objects.filter(status=Run.Status.RUNNING, stuck_reason="")
        .exclude(approvals__kind="question", approvals__status="pending")
        .annotate(last=Max("events__created", filter=~Q(events__type__in=BOOKKEEPING_EVENTS)))
    )
    stuck = 0
    for run in running.filter(last__lt=limit):
        reason = f"no progress since {run.last:%Y-%m-%d %H:%M:%S} UTC"
        with transaction.atomic(), UnitOfWork(run.pk) as uow:
            store().lock_run(run.pk)
            if Run.objects.filter(pk=run.pk, stuck_reason="").update(stuck_reason=reason):
                uow.sink.emit(RuntimeEvent.of(RunStuck(reason=reason)))
                stuck += 1
    # A stuck run that moved again (someone pressed Resume, a worker came back).
    for moved in Run.objects.exclude(stuck_reason="").filter(status=Run.Status.RUNNING):
        if Event.objects.filter(run=moved, created__gt=limit).exclude(type__in=BOOKKEEPING_EVENTS).exists():
            Run.objects.filter(pk=moved.pk).update(stuck_reason="")
    return stuck


class Sweeper:
    """A daemon thread that runs ``do_sweep`` every ZENWEB_SWEEP_SECONDS while
    its worker runs. Every worker has one; they do not get in each other's way."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="zenweb-sweeper", daemon=True)
        # Since when this sweeper has reached the database: its start, then
        # each sweep that lost its connection (leases_lapse).
        self._reached_since = time.monotonic()

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        # Dead workers are looked for at start (a worker restarted after a
        # crash hands on its predecessor's leases at once) and every
        # heartbeat; the rest every ZENWEB_SWEEP_SECONDS.
        beat = settings.ZENWEB_HEARTBEAT_SECONDS
        every = settings.ZENWEB_SWEEP_SECONDS
        sweep_at = time.monotonic() + every
        check_at = time.monotonic() + beat if beat > 0 else math.inf
        self.release_dead()
        while not self._stop.wait(max(0.0, min(sweep_at, check_at) - time.monotonic())):
            now = time.monotonic()
            if now >= sweep_at:
                sweep_at = now + every
                self.sweep()  # which looks for dead workers too
            else:
                self.release_dead()
            check_at = now + beat if beat > 0 else math.inf
        connection.close()

    def release_dead(self) -> None:
        """release_dead_workers; a failure is the next sweep's to see."""
        if settings.ZENWEB_HEARTBEAT_SECONDS > 0:
            self._attempt("looking for dead workers", release_dead_workers, then="looking again")

    def sweep(self) -> None:
        """One sweep (do_sweep)."""
        self._attempt("lease sweep", do_sweep, then="sweeping again")

    def _attempt(self, what: str, work: Callable[[float], object], *, then: str) -> None:
        """``work``, given how long this sweeper has reached the database; a
        lost connection restarts that time and is one line, not a traceback
        per round (expected while the database is away): the next round
        tries again."""
        try:
            close_old_connections()
            work(time.monotonic() - self._reached_since)
        except Exception as exc:  # noqa: BLE001 - keep sweeping; the next round may succeed
            if not connection_lost(exc):
                log.exception("%s failed", what)
                return
            self._reached_since = time.monotonic()
            log.warning("%s: the database cannot be reached (%s); %s", what, first_line(exc), then)
