"""A worker process that dies is known dead within seconds, and its leases
are handed on without waiting for them to run out: on this machine as soon
as its pid is gone (or is another process's), elsewhere once it has missed
four heartbeats."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs import leases, sweeper
from runs.models import Run, Step, ToolCall, WorkerProcess
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

needs_proc = pytest.mark.skipif(not leases.this_machine(), reason="needs Linux's /proc")


def running_step(owner: str, *, expires_in: float = 60) -> Step:
    """A running step whose turn ``owner`` claimed; its lease runs ``expires_in`` more seconds."""
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "tea"}, status="running")
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    return Step.objects.create(
        run=run,
        step_id="first",
        agent="sender",
        status="running",
        position=1,
        lease_owner=owner,
        lease_expires=timezone.now() + timedelta(seconds=expires_in),
    )


def process_name(pid: int) -> str:
    """What that process calls itself in its lease owners (leases.this_process)."""
    started = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[19]
    return f"{socket.gethostname()}:{pid}@{started}"


def beating(name: str, *, machine: str, age: float = 0) -> None:
    WorkerProcess.objects.create(name=name, machine=machine, beat=timezone.now() - timedelta(seconds=age))


@pytest.fixture
def child():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


@needs_proc
def test_a_dead_process_of_this_machine_loses_its_leases_at_once(child):
    name = process_name(child.pid)
    beating(name, machine=leases.this_machine())
    step = running_step(f"{name}:MainThread", expires_in=60)
    assert sweeper.release_dead_workers() == 0  # it lives

    child.kill()
    child.wait()
    assert sweeper.release_dead_workers() == 1

    step.refresh_from_db()
    assert (step.lease_owner, step.lease_expires) == ("", None) and step.turn_queued is not None
    assert step.run.events.get(type="lease_expired").data == {"owner": f"{name}:MainThread", "turn": 1}
    assert not WorkerProcess.objects.filter(name=name).exists()


@needs_proc
def test_a_new_process_with_the_dead_ones_pid_does_not_keep_its_leases(child):
    # The pid runs, but it started later than the process that took the lease.
    host, _, pid_start = process_name(child.pid).rpartition(":")
    pid, _, started = pid_start.partition("@")
    name = f"{host}:{pid}@{int(started) - 1}"
    beating(name, machine=leases.this_machine())
    step = running_step(f"{name}:MainThread")

    assert sweeper.release_dead_workers() == 1
    step.refresh_from_db()
    assert step.lease_owner == ""


def test_a_process_elsewhere_is_dead_after_four_missed_beats(settings):
    settings.ZENWEB_HEARTBEAT_SECONDS = 3
    beating("far:10@5", machine="another-boot/pid:[1]", age=13)
    beating("near:11@5", machine="another-boot/pid:[1]", age=2)
    # Taken (or renewed) 30 s ago, and not since: quiet as its beat.
    silent = running_step("far:10@5:MainThread", expires_in=30)
    alive = running_step("near:11@5:MainThread", expires_in=30)
    call = ToolCall.objects.create(
        run=silent.run,
        step=silent,
        tool_call_id="c1",
        name="run_shell",
        status=ToolCall.Status.RUNNING,
        attempts=1,
        lease_owner="far:10@5:zenweb-tool",
        lease_expires=timezone.now() + timedelta(seconds=30),
    )

    assert sweeper.release_dead_workers() == 2

    silent.refresh_from_db(), alive.refresh_from_db(), call.refresh_from_db()
    assert silent.lease_owner == "" and alive.lease_owner == "near:11@5:MainThread"
    assert (call.status, call.lease_owner) == (ToolCall.Status.QUEUED, "")
    assert list(WorkerProcess.objects.values_list("name", flat=True)) == ["near:11@5"]


def test_a_lease_taken_since_the_last_beat_is_a_sign_of_life(settings):
    # An idle process beats again only once it holds a lease: between its
    # claim and that first beat its row is stale, and it is not dead.
    settings.ZENWEB_HEARTBEAT_SECONDS = 3
    beating("far:10@5", machine="another-boot/pid:[1]", age=600)
    step = running_step("far:10@5:MainThread", expires_in=59)

    assert sweeper.release_dead_workers() == 0
    step.refresh_from_db()
    assert step.lease_owner == "far:10@5:MainThread"


def test_stale_beats_count_only_once_every_live_worker_had_time_to_beat(settings):
    # A sweeper that reaches the database again after an outage (or just
    # started) gives live workers four beats to be heard before it judges.
    settings.ZENWEB_HEARTBEAT_SECONDS = 3
    beating("far:10@5", machine="another-boot/pid:[1]", age=60)
    step = running_step("far:10@5:MainThread", expires_in=1)

    assert sweeper.release_dead_workers(reached_for=5) == 0
    assert sweeper.release_dead_workers(reached_for=13) == 1
    step.refresh_from_db()
    assert step.lease_owner == ""


def test_a_process_beats_while_it_holds_a_lease_and_names_itself_in_its_owner(settings):
    settings.ZENWEB_HEARTBEAT_SECONDS = 0.1
    owner = leases.worker_identity()
    name = leases.this_process()
    assert owner == f"{name}:{threading.current_thread().name}"
    step = running_step(owner)
    with leases.renewing(step.pk, owner):
        deadline = time.monotonic() + 10
        while not WorkerProcess.objects.filter(name=name).exists():
            assert time.monotonic() < deadline, "no beat"
            time.sleep(0.02)
        first = WorkerProcess.objects.get(name=name).beat
        while WorkerProcess.objects.get(name=name).beat == first:
            assert time.monotonic() < deadline, "no second beat"
            time.sleep(0.02)
    assert WorkerProcess.objects.get(name=name).machine == leases.this_machine()
    # This process is not dead to its own sweeper.
    assert sweeper.release_dead_workers() == 0


def test_a_process_that_takes_a_lease_again_soon_after_its_last_keeps_beating(settings):
    # Its last beat is recent when it takes the new lease: no beat at once,
    # but the next ones come on time while it holds the lease.
    settings.ZENWEB_HEARTBEAT_SECONDS = 1.0
    settings.ZENWEB_LEASE_SECONDS = 0.3  # renewed every 0.1 s: the renewer sees at once that it holds none
    owner, name = leases.worker_identity(), leases.this_process()
    step = running_step(owner)
    with leases.renewing(step.pk, owner):
        wait_for_beat = time.monotonic() + 10
        while not WorkerProcess.objects.filter(name=name).exists():
            assert time.monotonic() < wait_for_beat, "no beat"
            time.sleep(0.02)
    time.sleep(0.3)
    with leases.renewing(step.pk, owner):
        seen = {WorkerProcess.objects.get(name=name).beat}
        deadline = time.monotonic() + 10
        while len(seen) < 3:
            assert time.monotonic() < deadline, f"beats stopped: {sorted(seen)}"
            time.sleep(0.05)
            seen.add(WorkerProcess.objects.get(name=name).beat)


def test_a_sweeper_looks_for_dead_workers_as_it_starts_and_every_heartbeat_between_sweeps(settings):
    # A worker restarted after a crash hands on its predecessor's leases at
    # once, not after a sweep period.
    settings.ZENWEB_SWEEP_SECONDS = 60
    settings.ZENWEB_HEARTBEAT_SECONDS = 0.05
    calls = []

    class Recording(sweeper.Sweeper):
        def sweep(self):
            calls.append("sweep")

        def release_dead(self):
            calls.append("dead")

    started = Recording().start()
    try:
        deadline = time.monotonic() + 10
        while len(calls) < 4:
            assert time.monotonic() < deadline, calls
            time.sleep(0.01)
    finally:
        started.stop()
    assert calls[:4] == ["dead"] * 4


@needs_proc
def test_looking_for_dead_workers_costs_one_statement_when_none_died(child, settings):
    settings.ZENWEB_HEARTBEAT_SECONDS = 3
    beating(process_name(child.pid), machine=leases.this_machine())
    beating("far:10@5", machine="another-boot/pid:[1]", age=1)
    with CaptureQueriesContext(connection) as queries:
        assert sweeper.release_dead_workers() == 0
    assert len(queries) == 1, [q["sql"] for q in queries]
