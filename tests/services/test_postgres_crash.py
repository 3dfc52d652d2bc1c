"""PostgreSQL crashes in the middle of a run and nothing is lost.

The run, its workers and its broker use a PostgreSQL and a redis-server of
the test's own (tests/services/throwaway_postgres.py, throwaway_redis.py),
never the machine's. PostgreSQL crashes twice (all its processes quit at
once, nothing written), each time for about a second:

1. Right after a worker claimed step two's second turn. The claim commits
   with synchronous_commit off (runs/store/sql/rows.py LEASE_ONLY_COMMIT) and
   the turn's model then thinks for 3 s without writing, so the crash
   loses the claim (checked): docs/durability.md ("Leases") says the turn
   is then still marked queued and is taken again.
2. While step three's shell command runs: it finishes while the database
   is down, and its result must be stored when it is back, not run again.

After each restart the run goes on by itself: it completes, every step once,
each step's command leaves its line in the workspace exactly once, the
events are gapless and no message is left unread without a drop reason.

And a database that stays down longer than the workers' leases: a command
that finished meanwhile is not run again by another worker once it is back
(runs/sweeper.py leases_lapse), however long its recovery takes: on a loaded
machine (two busy processes on 2 cores) recovery outlasted the 2 s lease,
and a sweeper that judged by the server's uptime alone lapsed the live
worker's lease before it could renew it, in one run of three.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from tests.services.conftest import ROOT, worker_env, workers

pytestmark = [pytest.mark.services]

# Each step runs a shell command of a second that leaves the step's name in
# steps.log (turn 1, claimed with the step's start), then answers (turn 2,
# queued after the command's result and claimed on its own: a lease-only
# commit). Step two's model thinks for 3 seconds first: its claim stays the
# last thing written until the crash, and the worker that holds it notices
# the crash only after the database is back and this test has looked.
CHAIN = """\
name: postgres_crash_chain
agents:
  worker:
    description: worker agent
    tools: [run_shell]
    script:
      - calls: [{tool: run_shell, args: {command: "sleep 1 && echo $step >> steps.log"}}]
      - say: "done"
  thinker:
    description: thinker agent
    tools: [run_shell]
    script:
      - calls: [{tool: run_shell, args: {command: "sleep 1 && echo $step >> steps.log"}}]
      - {delay: 3, say: "done"}
steps:
  - {id: one, agent: worker}
  - {id: two, agent: thinker, dependsOn: [one]}
  - {id: three, agent: worker, dependsOn: [two]}
"""
STEPS = ["one", "two", "three"]
DOWN_SECONDS = 1.0

# One step: a shell command of a second, then an answer.
ONE_COMMAND = """\
name: postgres_outage_command
agents:
  worker:
    description: worker agent
    tools: [run_shell]
    script:
      - calls: [{tool: run_shell, args: {command: "sleep 1 && echo $step >> steps.log"}}]
      - say: "done"
steps:
  - {id: only, agent: worker}
"""


def test_a_run_loses_nothing_when_postgres_crashes_mid_run(tmp_path, own_postgres, own_redis):
    env = worker_env(
        tmp_path,
        own_redis.url,
        # Longer than the outage: a live worker's leases outlast it.
        ZENWEB_LEASE_SECONDS="5",
        ZENWEB_SWEEP_SECONDS="0.5",
        # Past the check below, with room for a slow restart on a loaded
        # machine: the sweeper queues a lost turn again only after it.
        ZENWEB_REQUEUE_AFTER="10",
    )
    url = own_postgres.url
    with workers(tmp_path, "crashed", env=env, database_url=url) as logs:
        run_id = start_run(tmp_path, url, own_redis.url)

        step_two = wait_for_claim(url, run_id, "two", turn=2)
        crashed = crash_for_a_while(own_postgres)
        # Lost, the claim left the turn marked queued since before the crash
        # (after it, a claim clears the mark and a sweep sets it to its time).
        queued = one(url, "SELECT turn_queued FROM runs_step WHERE id = %s", step_two)[0]
        assert queued is not None and queued < crashed, "the crash did not lose the claim: the WAL was flushed first"

        wait_for_running_command(url, run_id, "three")
        crashed = crash_for_a_while(own_postgres)

        status, error = wait_for_end(url, run_id, timeout=40)
        log = logs[0].read_text()

    assert status == "completed", (error, log[-3000:])
    assert steps_of(url, run_id) == [(step, "completed", 2) for step in STEPS], log[-3000:]
    effects = tmp_path / "workspaces" / f"run-{run_id}" / "steps.log"
    assert effects.read_text().split() == STEPS, log[-3000:]
    # Step three's command finished while the database was down: its result
    # was stored once the database was back, and the command was not run again.
    assert command_runs(url, run_id, "three") == [("done", 1)]
    assert stored_at(url, run_id, "three") > crashed
    assert_events_whole(url, run_id)
    assert unread_messages(url, run_id) == 0


def test_a_command_that_finished_during_an_outage_longer_than_its_lease_runs_once(tmp_path, own_postgres, own_redis):
    # A lease shorter than the outage: every lease has run out when the database is back.
    env = worker_env(tmp_path, own_redis.url, ZENWEB_LEASE_SECONDS="2", ZENWEB_SWEEP_SECONDS="0.5")
    url = own_postgres.url
    with workers(tmp_path, "outlived", env=env, database_url=url) as logs:
        run_id = start_run(tmp_path, url, own_redis.url, ONE_COMMAND)
        wait_for_running_command(url, run_id, "only")
        crash_for_a_while(own_postgres, down=4.0)
        status, error = wait_for_end(url, run_id, timeout=40)
        log = logs[0].read_text()

    assert status == "completed", (error, log[-3000:])
    # The worker that ran the command stored its result once the database was
    # back; no other worker took the call over when its lease had run out.
    events = all_rows(url, "SELECT type, data FROM runs_event WHERE run_id = %s ORDER BY seq", run_id)
    assert (tmp_path / "workspaces" / f"run-{run_id}" / "steps.log").read_text() == "only\n", "\n".join(
        map(str, events)
    )
    assert command_runs(url, run_id, "only") == [("done", 1)]
    lapsed = "SELECT count(*) FROM runs_event WHERE run_id = %s AND type = 'lease_expired'"
    assert one(url, lapsed, run_id)[0] == 0


def crash_for_a_while(server, down: float = DOWN_SECONDS) -> datetime:
    """Crash PostgreSQL, keep it down ``down`` seconds, start it again (it
    recovers from its WAL); return when it crashed."""
    crashed = datetime.now(UTC)
    server.crash()
    time.sleep(down)
    server.start()
    return crashed


def start_run(tmp_path: Path, database_url: str, redis_url: str, workflow_yaml: str = CHAIN) -> int:
    """Start a run of ``workflow_yaml`` as a user would, with `manage.py run_workflow`."""
    workflow = tmp_path / "workflow.yaml"
    workflow.write_text(workflow_yaml)
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url}
    command = [sys.executable, "manage.py", "run_workflow", str(workflow)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return int(re.search(r"run (\d+) of", done.stdout).group(1))


def one(database_url: str, sql: str, *params) -> tuple | None:
    with psycopg.connect(database_url, autocommit=True) as db:
        return db.execute(sql, params).fetchone()


def wait_for_claim(database_url: str, run_id: int, step_id: str, *, turn: int, timeout: float = 30) -> int:
    """The moment a worker holds the lease on turn ``turn`` of a step (its
    pk is returned): a claim is visible to others at once, before its WAL
    reaches the disk. Polled every few milliseconds on one connection."""
    sql = "SELECT id FROM runs_step WHERE run_id = %s AND step_id = %s AND turns = %s AND lease_owner <> ''"
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as db:
        while (row := db.execute(sql, (run_id, step_id, turn - 1)).fetchone()) is None:
            assert time.monotonic() < deadline, f"turn {turn} of step {step_id} was not claimed after {timeout}s"
            time.sleep(0.002)
    return row[0]


def wait_for_running_command(database_url: str, run_id: int, step_id: str, timeout: float = 30) -> None:
    """Until a step's shell command runs: its journal entry is there, not done."""
    sql = (
        "SELECT 1 FROM runs_toolexecution e JOIN runs_step s ON s.id = e.step_id"
        " WHERE s.run_id = %s AND s.step_id = %s AND e.status = 'running'"
    )
    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as db:
        while db.execute(sql, (run_id, step_id)).fetchone() is None:
            assert time.monotonic() < deadline, f"step {step_id}'s command did not start after {timeout}s"
            time.sleep(0.02)


def wait_for_end(database_url: str, run_id: int, timeout: float) -> tuple[str, str]:
    """The run's status and error once it is no longer pending or running."""
    deadline = time.monotonic() + timeout
    while True:
        status, error = one(database_url, "SELECT status, error FROM runs_run WHERE id = %s", run_id)
        if status not in ("pending", "running"):
            return status, error
        if time.monotonic() > deadline:
            sql = "SELECT type, step_id FROM runs_event WHERE run_id = %s ORDER BY seq"
            events = all_rows(database_url, sql, run_id)
            raise AssertionError(f"run {run_id} still {status} after {timeout}s; events: {events}")
        time.sleep(0.1)


def all_rows(database_url: str, sql: str, *params) -> list[tuple]:
    with psycopg.connect(database_url, autocommit=True) as db:
        return db.execute(sql, params).fetchall()


def steps_of(database_url: str, run_id: int) -> list[tuple[str, str, int]]:
    sql = "SELECT step_id, status, turns FROM runs_step WHERE run_id = %s AND kind = 'step' ORDER BY position"
    return all_rows(database_url, sql, run_id)


def command_runs(database_url: str, run_id: int, step_id: str) -> list[tuple[str, int]]:
    """Each of a step's journaled tool calls: its status and how many times it was started."""
    sql = (
        "SELECT e.status, e.attempts FROM runs_toolexecution e JOIN runs_step s ON s.id = e.step_id"
        " WHERE s.run_id = %s AND s.step_id = %s ORDER BY e.id"
    )
    return all_rows(database_url, sql, run_id, step_id)


def stored_at(database_url: str, run_id: int, step_id: str) -> datetime:
    sql = (
        "SELECT max(e.finished) FROM runs_toolexecution e JOIN runs_step s ON s.id = e.step_id"
        " WHERE s.run_id = %s AND s.step_id = %s"
    )
    return one(database_url, sql, run_id, step_id)[0]


def assert_events_whole(database_url: str, run_id: int) -> None:
    """Event seqs are exactly 1..N (tests/conftest.py assert_gapless, on this
    database), each step started and ended once, the workflow ended once, last."""
    events = all_rows(database_url, "SELECT seq, type, step_id FROM runs_event WHERE run_id = %s ORDER BY seq", run_id)
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    for step in STEPS:
        kinds = [kind for _, kind, step_id in events if step_id == step]
        assert (kinds.count("step_start"), kinds.count("step_end")) == (1, 1), (step, kinds)
    kinds = [kind for _, kind, _ in events]
    assert kinds[-1] == "workflow_end" and kinds.count("workflow_end") == 1, kinds


def unread_messages(database_url: str, run_id: int) -> int:
    sql = "SELECT count(*) FROM runs_message WHERE run_id = %s AND drained IS NULL AND drop_reason = ''"
    return one(database_url, sql, run_id)[0]
