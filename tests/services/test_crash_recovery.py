"""A worker killed with SIGKILL in the middle of a tool call: another worker
takes the call over when its lease expires, the run completes, nothing is
lost, and the tool's side effect happens exactly once."""

from __future__ import annotations

import json
import signal
import time

import pytest

from runs.actions import do_create_run
from runs.models import Message, Run, ToolExecution
from tests.conftest import assert_gapless, register, wait_for_run
from tests.services.conftest import workers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_it_finishes_a_run_whose_worker_was_killed_mid_tool(tmp_path):
    env = {
        "ZENWEB_WORKSPACES": str(tmp_path / "workspaces"),
        "ZENWEB_LEASE_SECONDS": "2",
        "ZENWEB_SWEEP_SECONDS": "0.5",
    }
    with workers(tmp_path, "doomed", env=env):
        doomed = workers.processes[0]
        run = do_create_run(register("durability/slow_effect"), {})
        deadline = time.monotonic() + 30
        while not ToolExecution.objects.filter(step__run=run, status="running").exists():
            assert time.monotonic() < deadline, "the tool never started"
            time.sleep(0.05)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)

    # The killed worker's task stays unacknowledged on the broker; a new
    # worker's sweep finds the expired lease and takes the turn over.
    with workers(tmp_path, "rescuer", env=env, purge=False):
        run = wait_for_run(run, timeout=60)

    assert run.status == Run.Status.COMPLETED, run.error
    effects = tmp_path / "workspaces" / f"run-{run.pk}" / "effects.log"
    assert effects.read_text() == "effect\n"
    execution = ToolExecution.objects.get(step__run=run)
    assert (execution.status, execution.attempts) == ("done", 2)
    assert run.events.filter(type="lease_expired", step_id="effect").count() == 1
    call = run.tool_calls.get(name="run_shell")
    assert json.loads(call.result) == {"result": {"exit_code": 0, "output": "1\n"}}
    # The call ran as its own task: the rescuer's sweep queued it again, once.
    assert (call.status, call.attempts) == ("done", 2)
    # Every message was read or dropped with a reason; every event is there once.
    assert not Message.objects.filter(run=run, drained=None, drop_reason="").exists()
    assert_gapless(run)


def test_it_finishes_a_run_across_a_redis_restart(tmp_path, own_redis):
    env = {
        "REDIS_URL": own_redis.url,
        "ZENWEB_SWEEP_SECONDS": "0.5",
        "ZENWEB_RESUME_AFTER": "3",
        "ZENWEB_LEASE_SECONDS": "5",
    }
    with workers(tmp_path, "before", env=env) as logs:
        worker = workers.processes[0]
        run = do_create_run(register("hub_and_spoke"), {})
        deadline = time.monotonic() + 30
        while not run.events.filter(type="step_start").exists():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)

        # Its own Redis (never the machine's), restarted without saving: queued tasks are lost.
        own_redis.stop()
        time.sleep(1)  # the workers notice
        own_redis.start()
        run = wait_for_run(run, timeout=120)
        # The worker reconnected: kombu's crash on the closed channel is worked around (zenweb/celery.py).
        assert worker.poll() is None, logs[0].read_text()[-3000:]
        assert run.status == Run.Status.COMPLETED, (run.error, logs[0].read_text()[-3000:])
    assert not Message.objects.filter(run=run, drained=None, drop_reason="").exists()
    assert_gapless(run)
    types = list(run.events.values_list("type", flat=True))
    assert types[-1] == "workflow_end" and types.count("workflow_end") == 1
