"""A database connection lost under a worker (a failover, a PgBouncer
restart, an idle reaper) is retried, not a failed step: runs complete as if
nothing happened, each side effect once. (tests/services has the same with
pg_terminate_backend on PostgreSQL.)"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import OperationalError
from django.db.backends.signals import connection_created

from runs.actions import do_create_run
from runs.models import Step, ToolCall
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


class Dropper:
    """An execute wrapper on every new connection that makes the statements
    a worker thread runs fail as a dropped connection does, when ``fires``
    says so (the test's own thread is spared)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def fires(self, sql: str) -> bool:
        raise NotImplementedError

    def __call__(self, execute, sql, params, many, context):
        if threading.current_thread() is not threading.main_thread():
            with self._lock:
                fire = self.fires(sql)
            if fire:
                raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    def install(self, sender, connection, **kwargs) -> None:
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


class ConnectionBlips(Dropper):
    """Makes the next statement a worker thread runs fail, each time it is armed."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = 0
        self.hit: list[str] = []

    def fires(self, sql: str) -> bool:
        if self.armed <= 0:
            return False
        self.armed -= 1
        self.hit.append(sql.split(None, 3)[:3][-1][:40])
        return True


@pytest.fixture
def blips():
    injector = ConnectionBlips()
    connection_created.connect(injector.install, weak=False)
    yield injector
    connection_created.disconnect(injector.install)


def run_through_blips(run, blips: ConnectionBlips, count: int) -> None:
    """Drop a worker's connection ``count`` times, one statement at a time,
    each time after the run moved on (a new event), so the drops land in
    different tasks: the start, turns, tool calls, wakes."""
    seen = -1
    deadline = time.monotonic() + 60
    while len(blips.hit) < count and time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_terminal:
            break
        events = run.events.count()
        if not blips.armed and events > seen:
            blips.armed = 1
            seen = events
        time.sleep(0.02)
    blips.armed = 0


@pytest.mark.sandbox
@pytest.mark.parametrize(("workflow", "inputs"), [("relay", {"subject": "tides"}), ("tools/appender_tasks", {})])
def test_a_run_completes_through_dropped_connections(celery_worker, blips, owner, settings, workflow, inputs):
    run = do_create_run(register(workflow), inputs, user=owner)

    run_through_blips(run, blips, count=6)
    run = wait_for_run(run, timeout=60)

    assert blips.hit, "no statement failed: the test injected nothing"
    assert run.status == "completed", (run.error, blips.hit)
    assert not run.steps.filter(status=Step.Status.FAILED).exists()
    assert not run.events.filter(type="error").exists()
    assert_gapless(run)
    assert run.events.order_by("-seq").values_list("type", flat=True)[0] == "workflow_end"
    if workflow == "tools/appender_tasks":
        workspace = settings.ZENWEB_WORKSPACES / f"run-{run.pk}"
        assert (workspace / "effects.log").read_text() == "once\n"
        assert ToolCall.objects.get(run=run, name="run_shell").status == ToolCall.Status.DONE


class FailsOnce(Dropper):
    """Makes the ``nth`` statement of a worker thread that contains ``text`` fail."""

    def __init__(self, text: str, nth: int) -> None:
        super().__init__()
        self.text, self.nth = text, nth
        self.seen = 0

    @property
    def hit(self) -> bool:
        return self.seen >= self.nth

    def fires(self, sql: str) -> bool:
        if self.text not in sql:
            return False
        self.seen += 1
        return self.seen == self.nth


# What follows a committed turn, run after its commit (the statement, and
# which of the run's statements with it): the successor's start (SQLite's
# statement; the first starts step one, in the run's start), and the request
# for the coordinator's finish wake.
AFTER_COMMIT = {
    "successor start": ('"turn_queued" = %s WHERE id IN', 2),
    "finish wake": ("wake_requests = wake_requests + 1", 1),
}


# On PostgreSQL: a successor starts with its first turn claimed (the first
# such statement starts step one, in the run's start; the second starts
# step two in the round trip that writes one's last turn: the statements
# sent before it commit, as a connection lost after the write would leave
# them), each step after the first is taken eagerly, and the last one's
# worker runs the finish wake itself.
AFTER_COMMIT_PG = {
    "successor start": ("turn_queued = NULL FROM", 2),
    "finish wake": ("wake_requests = wake_requests + 1", 1),
}


@pytest.mark.parametrize("lost", AFTER_COMMIT)
def test_a_connection_lost_after_a_turn_committed_loses_nothing_that_follows_it(celery_worker, owner, lost):
    _run_losing(FailsOnce(*AFTER_COMMIT[lost]), owner)


@pytest.mark.services
@pytest.mark.parametrize("lost", AFTER_COMMIT_PG)
def test_on_postgresql_a_connection_lost_after_a_turn_committed_loses_nothing(celery_worker, owner, lost):
    _run_losing(FailsOnce(*AFTER_COMMIT_PG[lost]), owner)


def _run_losing(fails: FailsOnce, owner) -> None:
    connection_created.connect(fails.install, weak=False)
    try:
        run = do_create_run(register("durability/quick_chain"), {}, user=owner)
        # Well within ZENWEB_RESUME_AFTER: found by the task's retry, not a resume.
        run = wait_for_run(run, timeout=20)
    finally:
        connection_created.disconnect(fails.install)

    assert fails.hit, f"{fails.seen} statements had {fails.text!r}: the test injected nothing"
    assert run.status == "completed", run.error
    assert list(run.steps.filter(kind=Step.Kind.STEP).values_list("status", flat=True)) == ["completed"] * 2
    assert not run.events.filter(type="run_resumed").exists()
    assert run.events.order_by("-seq").values_list("type", flat=True)[0] == "workflow_end"


class BrokenStatement(Dropper):
    """Makes the first statement of a worker thread that contains ``text``
    one that cannot run (a column that does not exist): a bug, as a missing
    migration would be, not a lost connection."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.sent = 0

    def __call__(self, execute, sql, params, many, context):
        if threading.current_thread() is not threading.main_thread() and self.text in sql:
            with self._lock:
                self.sent += 1
                first = self.sent == 1
            if first:
                return execute("SELECT no_such_column FROM runs_run", None, False, context)
        return execute(sql, params, many, context)


def test_a_statement_that_cannot_run_fails_the_run_at_once(celery_worker, owner):
    # The claim of a turn: here the first step's, in the run's start.
    broken = BrokenStatement("lease_expires IS NULL OR lease_owner = %s")
    connection_created.connect(broken.install, weak=False)
    try:
        run = do_create_run(register("relay"), {"subject": "tides"}, user=owner)
        run = wait_for_run(run, timeout=20)
    finally:
        connection_created.disconnect(broken.install)

    assert broken.sent, "no statement was broken: the test injected nothing"
    # Not retried for a quarter of an hour as a lost connection would be.
    assert run.status == "failed", run.status
    assert "could not start" in run.error and "no such column" in run.error, run.error
