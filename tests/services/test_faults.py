"""Faults production has, injected mid-run against real worker processes,
each test on its own redis-server (tests/services/throwaway_redis.py) and the
test database: runs complete, nothing is lost, and recovery takes seconds."""

from __future__ import annotations

import time

import pytest
import redis
from django.db import connection

from runs.actions import do_create_run, do_start_run
from runs.models import Message, Run, UnsentTask
from runs.sweeper import BROKER_MARK
from tests.conftest import assert_gapless, register, wait_for_run
from tests.services.conftest import worker_env, workers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

CHAIN = "durability/slow_chain"


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"{what} after {timeout}s"
        time.sleep(0.05)
    return found


def assert_whole(run: Run) -> None:
    assert run.status == Run.Status.COMPLETED, run.error
    assert not Message.objects.filter(run=run, drained=None, drop_reason="").exists()
    assert_gapless(run)
    types = list(run.events.values_list("type", flat=True))
    assert types[-1] == "workflow_end" and types.count("workflow_end") == 1


def test_a_run_completes_soon_after_redis_was_away_for_5_seconds(tmp_path, own_redis):
    with workers(tmp_path, "outage", env=worker_env(tmp_path, own_redis.url)) as logs:
        run = do_create_run(register(CHAIN), {})
        wait_until(lambda: run.events.filter(type="step_start", step_id="two").exists(), 30, "step two never started")

        own_redis.stop()
        time.sleep(5)
        own_redis.start()
        back = time.monotonic()
        run = wait_for_run(run, timeout=30)
        assert time.monotonic() - back < 30
        assert all(process.poll() is None for process in workers.processes), logs[0].read_text()[-3000:]

    assert_whole(run)
    assert (tmp_path / "workspaces" / f"run-{run.pk}" / "steps.log").read_text() == "step\n" * 4


def test_a_command_posted_while_redis_is_down_starts_when_it_is_back(tmp_path, own_redis):
    with workers(tmp_path, "posted", env=worker_env(tmp_path, own_redis.url)):
        own_redis.stop()
        run = do_create_run(register("relay"), {"subject": "tides"})
        assert UnsentTask.objects.filter(name="runs.tasks.start_run").exists()
        time.sleep(2)

        own_redis.start()
        back = time.monotonic()
        wait_until(lambda: Run.objects.get(pk=run.pk).status != Run.Status.PENDING, 30, "the run did not start")
        assert time.monotonic() - back < 30
        run = wait_for_run(run, timeout=30)

    assert_whole(run)
    assert not UnsentTask.objects.exists()


def test_queued_runs_start_after_redis_restarted_without_their_tasks(tmp_path, own_redis):
    # No worker yet: the runs' start tasks wait on the broker, which then loses them.
    runs = [do_create_run(register("relay"), {"subject": str(n)}) for n in range(3)]
    own_redis.stop()
    own_redis.start()

    with workers(tmp_path, "late", env=worker_env(tmp_path, own_redis.url, ZENWEB_REQUEUE_AFTER="2")):
        done = [wait_for_run(run, timeout=60) for run in runs]

    for run in done:
        assert_whole(run)
        assert run.stuck_reason == ""
        assert run.events.filter(type="workflow_start").count() == 1


def terminate_other_connections() -> int:
    """What a failover, a PgBouncer restart or an idle reaper does to the workers."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_a_run_completes_when_the_workers_database_connections_are_killed(tmp_path, own_redis):
    with workers(tmp_path, "severed", env=worker_env(tmp_path, own_redis.url)) as logs:
        run = do_create_run(register(CHAIN), {})
        killed = 0
        for step in ("one", "two", "three"):
            wait_until(
                lambda s=step: run.events.filter(type="step_start", step_id=s).exists(), 30, f"{step} not started"
            )
            time.sleep(0.3)
            killed += terminate_other_connections()
        run = wait_for_run(run, timeout=60)
        log = logs[0].read_text()

    assert killed, "no worker connection was there to kill"
    assert_whole(run), log[-3000:]
    assert not run.steps.filter(status="failed").exists()
    assert (tmp_path / "workspaces" / f"run-{run.pk}" / "steps.log").read_text() == "step\n" * 4


def test_a_run_whose_queued_tasks_a_redis_restart_lost_goes_on_within_seconds(tmp_path, own_redis):
    # One task at a time: the other steps' tasks wait on the broker. No
    # deadline would fire within the test (ZENWEB_RESUME_AFTER is 120 s).
    env = worker_env(tmp_path, own_redis.url)
    with workers(tmp_path, "single", env=env, concurrency=1) as logs:
        # A new broker has no mark: the first sweep sets it (and resumes nothing yet).
        broker = redis.Redis.from_url(own_redis.url)
        wait_until(lambda: broker.exists(BROKER_MARK), 10, "no sweeper marked the broker")
        run = do_create_run(register("durability/slow_fan"), {})
        wait_until(lambda: run.events.filter(type="tool_started").exists(), 30, "no tool started")

        own_redis.stop()
        own_redis.start()
        back = time.monotonic()
        run = wait_for_run(run, timeout=40)
        took = time.monotonic() - back
        log = logs[0].read_text()

    assert_whole(run)
    assert took < 30, log[-3000:]
    assert run.events.filter(type="run_resumed", data__reason__startswith="the broker restarted").count() == 1
    lines = (tmp_path / "workspaces" / f"run-{run.pk}" / "fan.log").read_text().split()
    assert sorted(lines) == ["a", "b", "c", "d"]


def test_a_step_turn_the_broker_dropped_is_queued_again_after_its_deadline(tmp_path, own_redis):
    from zenweb.celery import app

    # The broker keeps its mark: no restart is noticed, only the turn's deadline finds it.
    broker = redis.Redis.from_url(own_redis.url)
    broker.set(BROKER_MARK, "kept")
    run = Run.objects.create(workflow=register(CHAIN))
    do_start_run(run.pk)  # step one's first turn is queued...
    assert run.steps.get(step_id="one").turn_queued is not None
    app.control.purge()  # ...and dropped by the broker
    env = worker_env(tmp_path, own_redis.url, ZENWEB_REQUEUE_AFTER="2")
    with workers(tmp_path, "deadline", env=env) as logs:
        run = wait_for_run(run, timeout=40)
        log = logs[0].read_text()

    assert_whole(run)
    assert "turn 1 of step one was queued" in log, log[-3000:]
    # Found by its deadline, not by a resume of the whole run.
    assert not run.events.filter(type="run_resumed").exists()
    assert (tmp_path / "workspaces" / f"run-{run.pk}" / "steps.log").read_text() == "step\n" * 4
