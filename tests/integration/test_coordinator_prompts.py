"""What a real model coordinating a run is sent: the command, the workflow,
the run's input values and the steps with their states, never a raw
``$name`` (tests/fake_openai_server.py records every request)."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.actions.coordinator import READ_OUTPUT_CHARS
from runs.models import Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def finalize(summary: str) -> tuple[str, str, str]:
    return ("call_fin", "finalize", json.dumps({"summary": summary}))


def test_it_shows_the_coordinator_the_command_inputs_and_step_states(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([finalize("A note about ocean tides.")])
    openai_endpoint.push_text("done")

    run = do_create_run(
        register("coordinator/openai_sees_inputs"), {"topic": "ocean tides"}, command="Write up ocean tides"
    )
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.result == "A note about ocean tides."
    first = openai_endpoint.requests[0].body["messages"]
    system, wake = first[0]["content"], first[-1]["content"]
    assert system.startswith("You coordinate a write-up about ocean tides (budget $5).")
    assert "The command that started it: Write up ocean tides" in system
    assert 'Its inputs: {"topic": "ocean tides"}' in system
    assert "- write (completed): agent writer; Write a note about ocean tides." in system
    assert wake.startswith("Steps now: write completed.")
    assert "$topic" not in json.dumps(first)


def test_it_plans_with_the_run_s_query_in_the_prompt(celery_worker, openai_endpoint):
    spawn = {"task": "Search the sources for tablets for kids.", "agent": "worker"}
    openai_endpoint.push_tool_calls([("call_plan", "spawn_worker", json.dumps(spawn))])
    openai_endpoint.push_text("One worker planned.")
    openai_endpoint.push_tool_calls([finalize("Searched for tablets for kids.")])
    openai_endpoint.push_text("done")

    run = wait_for_run(do_create_run(register("coordinator/openai_planner"), {"query": "tablets for kids"}))

    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="worker-1").output == "searched"
    first = openai_endpoint.requests[0].body["messages"]
    assert 'Its inputs: {"query": "tablets for kids"}' in first[0]["content"]
    plan = first[-1]["content"]
    assert plan.startswith("Steps now: none yet.")
    assert 'The run\'s inputs: {"query": "tablets for kids"}' in plan
    assert "laptops" not in json.dumps(first)
    # Its next wake, to finish, shows the worker it planned and how it ended.
    finish = next(r.body["messages"] for r in openai_endpoint.requests if "Every step has finished" in str(r.body))
    assert "Steps now: worker-1 completed." in finish[-1]["content"]


def test_the_finish_quotes_whole_only_the_outputs_no_step_read_before(celery_worker):
    run = wait_for_run(do_create_run(register("coordinator/reads_once"), {}))

    assert run.status == Run.Status.COMPLETED
    first, second = (run.steps.get(step_id=s).output for s in ("worker-1", "worker-2"))
    assert len(first) > READ_OUTPUT_CHARS and len(second) > READ_OUTPUT_CHARS
    transcript = run.steps.get(step_id="coordinator").transcript
    [finish] = [m["content"] for m in transcript if "Every step has finished" in str(m.get("content"))]
    # worker-2 read worker-1's output whole: the coordinator gets its start and who read it.
    assert f"- worker-1 (read by worker-2): {first[:READ_OUTPUT_CHARS]}\n" in finish
    assert first not in finish
    assert f"- worker-2: {second}\n" in finish
