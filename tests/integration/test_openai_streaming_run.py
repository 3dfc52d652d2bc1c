"""A run on the openai provider streams its answers to the run page and
stores each retry of a model call as an event: against the local fake
endpoint through the real openai SDK, on a real (in-process) Celery worker."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from runs.actions import do_create_run
from runs.models import Event, Run, Step
from runs.routing import websocket_urlpatterns
from runs.templatetags.zenweb import event_summary
from tests.conftest import register, wait_for_run
from tests.fake_openai_server import Delivery

pytestmark = pytest.mark.django_db(transaction=True)

# The SDK's own backoff would wait half a second and more.
RETRY_SOON = {"retry-after-ms": "10"}
ANSWER = "The tides at Bergen rise twice a day; spring tides follow the full moon."


def test_it_stores_a_rate_limit_retry_as_an_event_and_completes(celery_worker, openai_endpoint):
    openai_endpoint.push_error(429, "Rate limit reached for requests.", error_type="requests", headers=RETRY_SOON)
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="analyse").output == "High tide at 6am."
    [retry] = run.events.filter(type="provider_retry")
    assert retry.step_id == "analyse"
    assert retry.data["status"] == 429
    assert retry.data["attempt"] == 1
    assert retry.data["wait"] == 0.01
    assert "Rate limit reached for requests." in retry.data["message"]
    assert "sk-test-not-a-secret" not in retry.data["message"]
    assert "HTTP 429, attempt 1, retrying in 0.01s" in event_summary(retry)
    assert len(openai_endpoint.requests) == 2


def test_it_fails_the_step_naming_http_500_after_its_retries(celery_worker, openai_endpoint):
    for _attempt in range(3):
        openai_endpoint.push_error(500, "upstream exploded", headers=RETRY_SOON)

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.FAILED
    error = run.steps.get(step_id="analyse").error
    assert "HTTP 500 from the model endpoint" in error and "upstream exploded" in error
    assert "Network error" not in error
    retries = run.events.filter(type="provider_retry").order_by("seq")
    assert [(e.data["status"], e.data["attempt"]) for e in retries] == [(500, 1), (500, 2)]


def test_a_streamed_answer_is_stored_once_whole(celery_worker, openai_endpoint):
    openai_endpoint.push_text(ANSWER, delivery=Delivery(chunk_delay=0.01))

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert run.status == Run.Status.COMPLETED
    [request] = openai_endpoint.requests
    assert request.body["stream"] is True
    assert len(openai_endpoint.streamed) > 10
    assert run.steps.get(step_id="analyse").output == ANSWER
    # One turn, one event with its text: no event per token.
    [turn] = run.events.filter(type="agent_turn", step_id="analyse")
    assert turn.data["content"] == ANSWER
    assert run.events.count() < len(openai_endpoint.streamed)


def test_the_provider_retry_event_has_its_shape(celery_worker, openai_endpoint):
    openai_endpoint.push_error(503, "overloaded", headers=RETRY_SOON)
    openai_endpoint.push_text("done")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    event = Event.objects.get(run=run, type="provider_retry")
    assert set(event.data) == {"status", "message", "attempt", "wait"}
    assert isinstance(event.data["message"], str) and isinstance(event.data["wait"], float)


async def _frames_until_partial(comm: WebsocketCommunicator, timeout: float) -> dict:
    """Read frames (the replay's HTML first) until a partial answer's."""
    deadline = time.monotonic() + timeout
    while True:
        frame = await comm.receive_from(timeout=max(0.01, deadline - time.monotonic()))
        if frame.startswith("{"):
            return json.loads(frame)["partial"]


async def test_a_page_that_connects_mid_answer_gets_the_text_so_far(celery_worker, openai_endpoint, owner):
    # Chunks a second apart: what arrives within half a second of a chunk
    # was kept from before the page connected, not sent live.
    answer = "Tides rise twice a day at Bergen"  # 4 chunks of 8
    openai_endpoint.push_text(answer, delivery=Delivery(chunk_delay=1.0, chunk_chars=8))
    run = await database_sync_to_async(lambda: do_create_run(register("openai_step"), {}, user=owner))()
    while len(openai_endpoint.streamed) < 2:
        await asyncio.sleep(0.02)
    sent_at = openai_endpoint.streamed[-1][0]
    await asyncio.sleep(0.15)  # the worker's publish of that chunk

    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/?after=0")
    comm.scope["user"] = owner
    connected, _ = await comm.connect()
    assert connected
    partial = await _frames_until_partial(comm, timeout=0.7)

    assert time.time() - sent_at < 0.95 and len(openai_endpoint.streamed) == 2
    assert partial["step"] == "analyse"
    assert partial["text"] == answer[:16]
    # Then live, as the answer grows.
    later = await _frames_until_partial(comm, timeout=3)
    assert later["text"] == answer[:24]
    await comm.disconnect()
    run = await database_sync_to_async(wait_for_run)(run)
    step = await database_sync_to_async(Step.objects.get)(run=run, step_id="analyse")
    assert step.output == answer


def test_the_coordinators_call_streams_and_its_retries_are_events(celery_worker, openai_endpoint):
    openai_endpoint.push_error(502, "bad gateway", headers=RETRY_SOON)
    summary = json.dumps({"summary": "The tide is in at Bergen."})
    openai_endpoint.push_tool_calls([("call_1", "finalize", summary)], chunk_delay=0.01)
    # A round after finalize may still ask (issue 24, point 7): give it an answer.
    openai_endpoint.push_text("Done.")

    run = wait_for_run(do_create_run(register("openai_coordinator"), {}))

    assert run.status == Run.Status.COMPLETED
    assert run.result == "The tide is in at Bergen."
    [retry] = run.events.filter(type="provider_retry")
    assert (retry.step_id, retry.data["status"], retry.data["attempt"]) == ("coordinator", 502, 1)
    assert all(request.body["stream"] is True for request in openai_endpoint.requests)


def test_a_command_whose_model_answers_500_names_the_status_not_a_network_error(openai_endpoint, monkeypatch):
    from runs.actions.commands import do_command

    monkeypatch.setenv("ZENWEB_LLM", "openai")
    for _attempt in range(3):
        openai_endpoint.push_error(500, "upstream exploded", headers=RETRY_SOON)

    command = do_command("Run research workflow for laptops under $1000")

    assert command.status == "error"
    assert "HTTP 500 from the model endpoint" in command.result["error"]
    assert "upstream exploded" in command.result["error"]
    assert "Network error" not in command.result["error"]
