"""A clean PostgreSQL restart (`pg_ctl stop -m fast`, then start: every
session ended, its transaction rolled back) with three runs in flight, on a
PostgreSQL and a redis-server of the test's own: each run completes, every
step once, each step's command run once (the journal), the events gapless
with workflow_end last, no message left unread. The crash of the server
(nothing written) is tests/services/test_postgres_crash.py's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.services.conftest import ROOT, worker_env, workers
from tests.services.test_postgres_crash import (
    STEPS,
    assert_events_whole,
    command_runs,
    one,
    start_run,
    steps_of,
    unread_messages,
    wait_for_end,
)

pytestmark = [pytest.mark.services]


def start_run_in_background(tmp_path: Path, database_url: str, redis_url: str) -> subprocess.Popen:
    """`manage.py run_workflow` of the workflow start_run wrote, not waited for."""
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url}
    command = [sys.executable, "manage.py", "run_workflow", str(tmp_path / "workflow.yaml")]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_a_command(database_url: str, run_id: int, timeout: float = 30) -> None:
    """Until a run's first command started (its journal entry is there)."""
    sql = "SELECT 1 FROM runs_toolexecution e JOIN runs_step s ON s.id = e.step_id WHERE s.run_id = %s"
    deadline = time.monotonic() + timeout
    while one(database_url, sql, run_id) is None:
        assert time.monotonic() < deadline, f"run {run_id} ran no command after {timeout}s"
        time.sleep(0.05)


def test_runs_in_flight_across_a_postgres_restart_complete_with_nothing_lost(tmp_path, own_postgres, own_redis):
    env = worker_env(tmp_path, own_redis.url, ZENWEB_LEASE_SECONDS="5", ZENWEB_REQUEUE_AFTER="4")
    url = own_postgres.url
    with workers(tmp_path, "db-restart", env=env, database_url=url) as logs:
        first = start_run(tmp_path, url, own_redis.url)  # registers the workflow; waits for its run
        runs = [first + n for n in (1, 2, 3)]
        starters = [start_run_in_background(tmp_path, url, own_redis.url) for _ in runs]
        try:
            for run in runs:
                wait_for_a_command(url, run)
            statuses = [one(url, "SELECT status FROM runs_run WHERE id = %s", run)[0] for run in runs]
            own_postgres.restart()
            ends = {run: wait_for_end(url, run, timeout=60) for run in runs}
        finally:
            for starter in starters:
                starter.kill()
                starter.wait()
        log = logs[0].read_text()

    assert statuses == ["running"] * 3, "a run ended before the restart"
    for run, (status, error) in ends.items():
        assert status == "completed", (run, error, log[-3000:])
        assert steps_of(url, run) == [(step, "completed", 2) for step in STEPS], log[-3000:]
        for step in STEPS:
            assert command_runs(url, run, step) == [("done", 1)], (run, step, log[-3000:])
        assert_events_whole(url, run)
        assert unread_messages(url, run) == 0
