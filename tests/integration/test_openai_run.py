"""A run whose step talks to an OpenAI-compatible endpoint through the real
openai SDK (a local fake server), on a real Celery worker."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import register, wait_for_run
from tests.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def endpoint(monkeypatch):
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
        monkeypatch.setenv("ZENWEB_MODEL", "tide-model")
        yield server


def test_it_runs_a_step_on_the_openai_provider_with_tool_calls(celery_worker, endpoint):
    endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="analyse").output == "High tide at 6am."
    first, second = (request.body for request in endpoint.requests)
    assert first["model"] == "tide-model"
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"].startswith("You analyse things.")
    assert first["messages"][1] == {"role": "user", "content": "Analyse the tides."}
    assert [tool["function"]["name"] for tool in first["tools"]] == ["send_message"]
    # The second turn replays the conversation, with the tool's result.
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "queued: msg-send-1"}
    assert run.events.get(type="coordinator_narration").data["text"] == "analyse says: tides are high"


def test_it_fails_the_step_with_the_endpoint_error_and_no_secret(celery_worker, endpoint):
    for _attempt in range(3):  # the SDK retries twice before giving up
        endpoint.push_error(500, "upstream exploded")

    run = wait_for_run(do_create_run(register("openai_step"), {}), timeout=60)

    assert run.status == Run.Status.FAILED
    error = run.steps.get(step_id="analyse").error
    assert "HTTP 500" in error and "upstream exploded" in error
    assert "sk-test-not-a-secret" not in error
    assert "sk-test-not-a-secret" not in json.dumps(list(run.events.values_list("data", flat=True)))
