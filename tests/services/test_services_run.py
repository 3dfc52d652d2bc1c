"""The services configuration: PostgreSQL, Redis, and a separate worker process.

`make test` runs this module in a second pass with DATABASE_URL and REDIS_URL
set; under CI=true a missing service is a failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import RELAY_SECOND_EVENTS, event_types, register, wait_for_run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def services_required():
    missing = [
        what
        for what, ok in (
            ("DATABASE_URL (PostgreSQL)", connection.vendor == "postgresql"),
            ("REDIS_URL", settings.REDIS_URL.startswith("redis://")),
        )
        if not ok
    ]
    if missing:
        message = f"services tests need {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def worker_process(tmp_path):
    """`celery -A zenweb worker` in its own process, on the test database."""
    env = dict(os.environ)
    db = connection.settings_dict
    env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    from zenweb.celery import app

    app.control.purge()  # tasks a killed earlier run may have left on the broker
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "zenweb", "worker", "--pool", "threads", "-c", "4", "-l", "INFO"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    while "ready." not in log.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the worker did not start:\n{log.read_text()}")
        time.sleep(0.2)
    yield process
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def test_it_runs_the_relay_on_a_separate_worker_with_postgres_and_redis(worker_process):
    run = do_create_run(register("relay"), {"subject": "glaciers"})

    run = wait_for_run(run, timeout=60)

    assert run.status == Run.Status.COMPLETED
    assert event_types(run, step_id="second") == RELAY_SECOND_EVENTS
    types = event_types(run)
    assert types[0] == "workflow_start" and types[-1] == "workflow_end"
    assert types.index("coordinator_message") < types.index("agent_inbox_drain")
    assert (
        run.events.get(type="coordinator_narration").data["text"] == "second says: second got: the subject is glaciers"
    )
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_it_runs_parallel_steps_across_worker_threads(worker_process):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    starts = {e.step_id: e.seq for e in run.events.filter(type="step_start")}
    ends = {e.step_id: e.seq for e in run.events.filter(type="step_end")}
    assert starts["check_prices"] < ends["research"] and starts["research"] < ends["check_prices"]
    assert run.events.get(type="coordinator_message").data["to"] == "writer"
