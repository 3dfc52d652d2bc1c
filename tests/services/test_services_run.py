"""The services configuration: PostgreSQL, Redis, and a separate worker process.

`make test` runs this module in a second pass with DATABASE_URL and REDIS_URL
set; under CI=true a missing service is a failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import RELAY_SECOND_EVENTS, assert_gapless, event_types, register, wait_for_run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


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
    assert_gapless(run)


def test_it_runs_parallel_steps_across_worker_threads(worker_process):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    starts = {e.step_id: e.seq for e in run.events.filter(type="step_start")}
    ends = {e.step_id: e.seq for e in run.events.filter(type="step_end")}
    assert starts["check_prices"] < ends["research"] and starts["research"] < ends["check_prices"]
    assert run.events.get(type="coordinator_message").data["to"] == "writer"
