"""A worker whose process group is SIGKILLed in the middle of a tool call,
with the default lease, sweep and heartbeat settings: its call runs again
and the run completes within 30 s of the kill (issue 46), whether the worker
is started again or another one already runs; its side effect happens once.

- restarted: the new worker's sweeper sees at its start that the lease's
  owner, a pid of this machine, is gone;
- not restarted, another worker alive: that worker sees it the same way
  within a heartbeat;
- not restarted, the dead worker in a pid namespace of its own (as another
  machine would be: its pids mean nothing here): the other worker knows it
  dead by its missed heartbeats;
- killed after its command's effect and the journal entry, before the
  call's result was stored: the call is not run again, its journaled
  result is delivered (the effect once).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from runs.actions import do_create_run
from runs.models import Message, Run, ToolCall, ToolExecution
from tests.conftest import assert_gapless, register, wait_for_run
from tests.services.conftest import ROOT
from zenweb.workers import PROCFILE_FLAGS

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# The bound, from the kill to the run's end, with default settings.
BOUND_SECONDS = 30
DEFAULTS_OVERRIDDEN = ("ZENWEB_LEASE_SECONDS", "ZENWEB_SWEEP_SECONDS", "ZENWEB_HEARTBEAT_SECONDS")


def database_url() -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@contextlib.contextmanager
def worker_group(tmp_path: Path, name: str, *, own_pid_namespace: bool = False, idle: bool = False):
    """A `celery worker` (prefork, two children) as the Procfile starts it,
    with every durability setting at its default, in a process group of its
    own (a session) so that the whole group can be SIGKILLed, as a crash or
    an OOM kill of a container does. Yields its Popen once it is ready.
    ``idle``: it consumes no queue until ``consume`` is called (its sweeper
    runs all the while), so that the run's first tasks go to the other."""
    env = {k: v for k, v in os.environ.items() if k not in DEFAULTS_OVERRIDDEN}
    env |= {"DATABASE_URL": database_url(), "ZENWEB_WORKSPACES": str(tmp_path / "workspaces")}
    command = [sys.executable, "-m", "celery", "-A", "zenweb", "worker", "--pool", "prefork", *PROCFILE_FLAGS]
    command += ["--concurrency", "2", "--loglevel", "INFO", "--hostname", hostname(name)]
    if idle:
        command += ["--queues", "nothing-is-sent-here"]
    if own_pid_namespace:
        command = ["unshare", "--pid", "--fork", "--mount-proc", *command]
    log = tmp_path / f"{name}.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 30
        while "ready." not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        worker_group.logs[name] = log
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


worker_group.logs = {}


@pytest.fixture(autouse=True)
def empty_broker():
    from zenweb.celery import app

    app.control.purge()  # tasks an earlier test's killed worker left unacknowledged
    yield
    app.control.purge()


def kill_group(process: subprocess.Popen) -> datetime:
    """SIGKILL the worker's whole process group; when."""
    killed = datetime.now(UTC)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    return killed


def start_slow_effect() -> Run:
    """The tool sleeps 3 s, then appends a line to effects.log: killed mid-sleep, it left nothing yet."""
    run = do_create_run(register("durability/slow_effect"), {})
    deadline = time.monotonic() + 30
    while not ToolExecution.objects.filter(step__run=run, status="running").exists():
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.05)
    return run


def assert_done_once(run: Run, killed: datetime) -> None:
    logs = "\n".join(f"--- {n}\n{p.read_text()[-2000:]}" for n, p in worker_group.logs.items())
    assert run.status == Run.Status.COMPLETED, (run.error, logs)
    took = (run.finished - killed).total_seconds()
    assert took < BOUND_SECONDS, f"the run ended {took:.1f}s after the kill\n{logs}"
    # The command appends its line, then counts the lines (the workspace may
    # be an image unmounted after the run: its count is what shows them).
    # One: the killed attempt left none, or its own was journaled and delivered.
    call = run.tool_calls.get(name="run_shell")
    assert (call.status, call.attempts) == ("done", 2)
    assert json.loads(call.result) == {"result": {"exit_code": 0, "output": "1\n"}}
    print(f"run {run.pk} ended {took:.1f}s after the kill")
    assert run.events.filter(type="lease_expired", step_id="effect").count() == 1
    assert not Message.objects.filter(run=run, drained=None, drop_reason="").exists()
    assert_gapless(run)
    types = list(run.events.values_list("type", flat=True))
    assert types[-1] == "workflow_end" and types.count("workflow_end") == 1


def test_a_restarted_worker_runs_its_killed_predecessors_call_again_at_once(tmp_path):
    with worker_group(tmp_path, "doomed") as doomed:
        run = start_slow_effect()
        killed = kill_group(doomed)
    with worker_group(tmp_path, "restarted"):
        run = wait_for_run(run, timeout=BOUND_SECONDS + 10)
    assert_done_once(run, killed)
    assert ToolExecution.objects.get(step__run=run).attempts == 2


def hostname(name: str) -> str:
    return f"{name}-{os.getpid()}@{socket.gethostname()}"


def consume(name: str) -> None:
    """The idle worker ``name`` consumes the queue every task goes to from now on."""
    from zenweb.celery import app

    replies = app.control.add_consumer("celery", destination=[hostname(name)], reply=True, timeout=10)
    assert replies, f"worker {name} did not answer"


def test_another_live_worker_takes_over_the_call_of_one_killed_and_not_restarted(tmp_path):
    with worker_group(tmp_path, "doomed") as doomed, worker_group(tmp_path, "survivor", idle=True):
        run = start_slow_effect()
        killed = kill_group(doomed)
        consume("survivor")
        run = wait_for_run(run, timeout=BOUND_SECONDS + 10)
    assert_done_once(run, killed)


@pytest.mark.skipif(
    os.geteuid() != 0 and os.environ.get("CI") != "true", reason="a pid namespace of its own needs root"
)
def test_a_worker_whose_pids_mean_nothing_here_is_known_dead_by_its_missed_heartbeats(tmp_path):
    assert shutil.which("unshare"), "unshare (util-linux) is needed"
    with (
        worker_group(tmp_path, "far", own_pid_namespace=True) as far,
        worker_group(tmp_path, "survivor", idle=True),
    ):
        run = start_slow_effect()
        killed = kill_group(far)
        consume("survivor")
        run = wait_for_run(run, timeout=BOUND_SECONDS + 10)
    assert_done_once(run, killed)


def test_a_call_whose_effect_was_journaled_but_whose_result_was_not_stored_is_not_run_again(tmp_path):
    with worker_group(tmp_path, "doomed") as doomed, worker_group(tmp_path, "survivor", idle=True):
        run = start_slow_effect()
        with psycopg.connect(database_url()) as holder:
            # Hold the run's lock (runs/store/sql/runs.py lock_run): the worker
            # journals the command's outcome, then waits for the lock to store
            # the call's result, and is killed there.
            holder.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE", (run.pk,))
            deadline = time.monotonic() + 30
            while not ToolExecution.objects.filter(step__run=run, status="done").exists():
                assert time.monotonic() < deadline, "the command's outcome was never journaled"
                time.sleep(0.05)
            assert ToolCall.objects.get(run=run, name="run_shell").status == ToolCall.Status.RUNNING
            killed = kill_group(doomed)
            holder.rollback()
            consume("survivor")
            run = wait_for_run(run, timeout=BOUND_SECONDS + 10)
    assert_done_once(run, killed)
    # The second attempt found the journaled outcome and did not run the command.
    assert ToolExecution.objects.get(step__run=run).attempts == 1
