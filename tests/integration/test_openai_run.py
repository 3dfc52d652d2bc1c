"""A run whose step talks to an OpenAI-compatible endpoint through the real
openai SDK (a local fake server), on a real Celery worker."""

from __future__ import annotations

import json
import re

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import OPENAI_TEST_MODEL, register, wait_for_run
from tests.fake_openai_server import Delivery

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_runs_a_step_on_the_openai_provider_with_tool_calls(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="analyse").output == "High tide at 6am."
    first, second = (request.body for request in openai_endpoint.requests)
    assert first["model"] == OPENAI_TEST_MODEL
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"].startswith("You analyse things.")
    assert first["messages"][1] == {"role": "user", "content": "Analyse the tides."}
    assert [tool["function"]["name"] for tool in first["tools"]] == ["send_message"]
    # The second turn replays the conversation, with the tool's result.
    queued = json.dumps({"result": {"status": "queued", "message_id": "msg-send-1"}})
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": queued}
    assert run.events.get(type="coordinator_narration").data["text"] == "analyse says: tides are high"


def test_it_fails_the_step_with_the_endpoint_error_and_no_secret(celery_worker, openai_endpoint):
    for _attempt in range(3):  # the SDK retries twice before giving up
        openai_endpoint.push_error(500, "upstream exploded")

    run = wait_for_run(do_create_run(register("openai_step"), {}), timeout=60)

    assert run.status == Run.Status.FAILED
    error = run.steps.get(step_id="analyse").error
    assert "HTTP 500" in error and "upstream exploded" in error
    assert "sk-test-not-a-secret" not in error
    assert "sk-test-not-a-secret" not in json.dumps(list(run.events.values_list("data", flat=True)))


def test_it_cuts_off_a_stalled_model_call_at_the_step_timeout(celery_worker, openai_endpoint):
    openai_endpoint.push_text("far too late", delivery=Delivery(delay=60))

    # No sweeper runs here: only the call's own deadline can end the step in time.
    run = wait_for_run(do_create_run(register("timeouts/stalled_openai"), {}), timeout=20)

    assert run.status == Run.Status.FAILED
    error = run.steps.get(step_id="analyse").error
    assert re.fullmatch(r"step analyse ran \d+\.\ds, past options\.stepTimeout \(0\.5s\)", error)
    assert len(openai_endpoint.requests) == 1


def test_it_cuts_off_a_stalled_coordinator_call_at_the_run_timeout(celery_worker, openai_endpoint):
    openai_endpoint.push_text("far too late", delivery=Delivery(delay=60))

    run = wait_for_run(do_create_run(register("timeouts/stalled_coordinator"), {}), timeout=20)

    assert run.status == Run.Status.FAILED
    assert re.fullmatch(r"run timed out: ran \d+\.\ds, options\.timeout is 1s", run.error)
    assert run.steps.get(step_id="quick").status == Step.Status.COMPLETED
    assert len(openai_endpoint.requests) == 1


def test_it_fails_the_step_whose_answer_was_cut_at_the_models_token_limit(celery_worker, openai_endpoint):
    # A cut answer stored as the step's output would reach its dependents
    # and the run's result as if it were whole.
    openai_endpoint.push_text("The tides at the harbour are high because the mo", finish_reason="length")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.FAILED
    step = run.steps.get(step_id="analyse")
    assert (step.status, step.output) == (Step.Status.FAILED, "")
    assert "stopped at its output token limit (finish_reason length)" in step.error
    assert len(openai_endpoint.requests) == 1


def test_a_step_that_names_its_own_model_asks_that_model(celery_worker, openai_endpoint):
    openai_endpoint.push_text("High tide at 6am.")
    openai_endpoint.push_text("Checked.")

    run = wait_for_run(do_create_run(register("openai_step_models"), {}))

    assert run.status == Run.Status.COMPLETED
    assert [request.body["model"] for request in openai_endpoint.requests] == ["analyst-model", "checker-model"]
    assert run.steps.get(step_id="check").model == "checker-model"
