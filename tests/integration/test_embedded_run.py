"""Runs through a real Celery worker on the embedded configuration."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Message, Run, Step
from tests.conftest import RELAY_FIRST_EVENTS, RELAY_SECOND_EVENTS, assert_gapless, event_types, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def assert_in_order(run, expected: list[tuple[str, str]]) -> None:
    """``expected`` (type, step_id) pairs occur in this order in the event log."""
    log = list(run.events.order_by("seq").values_list("type", "step_id"))
    position = 0
    for wanted in expected:
        try:
            position = log.index(wanted, position) + 1
        except ValueError:
            raise AssertionError(f"{wanted} not found after position {position} in {log}") from None


def test_it_relays_a_message_through_the_coordinator(celery_worker):
    run = do_create_run(register("relay"), {"subject": "tides"})

    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert event_types(run, step_id="first") == RELAY_FIRST_EVENTS
    assert event_types(run, step_id="second") == RELAY_SECOND_EVENTS
    assert_in_order(
        run,
        [
            ("workflow_start", ""),
            ("message_sent", "first"),
            ("coordinator_inbox_message", "coordinator"),
            ("coordinator_message", "coordinator"),
            ("step_start", "second"),
            ("agent_inbox_drain", "second"),
            ("message_sent", "second"),
            ("coordinator_narration", "coordinator"),
            ("coordinator_synthesis", "coordinator"),
            ("workflow_end", ""),
        ],
    )
    assert event_types(run)[-1] == "workflow_end"
    # The forwarded text reached second's model, and its answer came back.
    narration = run.events.get(type="coordinator_narration").data["text"]
    assert narration == "second says: second got: the subject is tides"
    assert run.steps.get(step_id="second").output == "second done with tides"
    assert run.steps.get(step_id="coordinator").status == Step.Status.COMPLETED
    assert "second: second done with tides" in run.result


def test_it_keeps_seq_gapless_and_every_message_accounted_for(celery_worker):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "moons"}))

    assert_gapless(run)
    assert run.last_event_seq == run.events.count()
    # Each message was drained exactly once or dropped with an event.
    messages = Message.objects.filter(run=run)
    assert messages.count() == 3
    assert all(m.drained is not None for m in messages)
    assert run.events.filter(type="message_dropped").count() == 0


def test_it_runs_the_demo_with_parallel_steps_and_hub_and_spoke(celery_worker):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    starts = {e.step_id: e.seq for e in run.events.filter(type="step_start")}
    ends = {e.step_id: e.seq for e in run.events.filter(type="step_end")}
    # research and check_prices ran side by side; writer waited for both.
    assert starts["check_prices"] < ends["research"] and starts["research"] < ends["check_prices"]
    assert starts["writer"] > max(ends["research"], ends["check_prices"])
    assert_in_order(
        run,
        [
            ("workflow_start", ""),
            ("message_sent", "research"),
            ("coordinator_inbox_message", "coordinator"),
            ("coordinator_message", "coordinator"),
            ("step_start", "writer"),
            ("agent_inbox_drain", "writer"),
            ("message_sent", "writer"),
            ("coordinator_narration", "coordinator"),
            ("coordinator_synthesis", "coordinator"),
            ("workflow_end", ""),
        ],
    )
    forwarded = run.events.get(type="coordinator_message").data
    assert forwarded["to"] == "writer"
    assert forwarded["text"].startswith("lead with battery life")


def test_it_fails_the_run_with_the_provider_error_and_cancels_dependents(celery_worker):
    run = wait_for_run(do_create_run(register("broken_provider"), {}))

    assert run.status == Run.Status.FAILED
    fetch = run.steps.get(step_id="fetch")
    assert fetch.status == Step.Status.FAILED
    assert fetch.error == "model endpoint said: 503 upstream overloaded"
    # onStepFailure defaults to cascade: dependents are cancelled, not run.
    assert run.steps.get(step_id="summarize").status == Step.Status.CANCELLED
    assert "step fetch failed: model endpoint said: 503 upstream overloaded" in run.error
    # The coordinator ends as its run did, and says why.
    coordinator = run.steps.get(step_id="coordinator")
    assert (coordinator.status, coordinator.error) == (Step.Status.FAILED, run.error)
    error = run.events.get(type="error")
    assert (error.step_id, error.data["error"]) == ("fetch", "model endpoint said: 503 upstream overloaded")
    assert run.events.get(type="step_skipped").step_id == "summarize"
    last = run.events.order_by("-seq").first()
    assert (last.type, last.data["status"]) == ("workflow_end", "failed")


def test_it_drops_a_forward_to_an_unknown_step_with_one_event(celery_worker):
    run = wait_for_run(do_create_run(register("misaddressed"), {}))

    drops = run.events.filter(type="message_dropped")
    assert [d.data for d in drops] == [
        {"reason": "unknown-step", "from": "coordinator", "to": "nobody", "msg_type": "info", "message_id": "msg-fwd-2"}
    ]
    result = run.tool_calls.get(name="forward_to_agent").result
    dropped = json.loads(result)["result"]
    assert (dropped["status"], dropped["reason"]) == ("dropped", "unknown-step")
    assert dropped["detail"].startswith("Registered steps: [talker]")
    assert Message.objects.get(run=run, message_id="msg-fwd-2").drop_reason == "unknown-step"
    assert run.status == Run.Status.COMPLETED


def test_it_fails_the_run_when_the_coordinator_model_fails(celery_worker):
    run = wait_for_run(do_create_run(register("coordinator_down"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error == "coordinator: coordinator model down"
    assert_gapless(run)
    assert event_types(run)[-1] == "workflow_end"
    assert run.events.get(type="error", step_id="").data == {"error": "coordinator: coordinator model down"}
    assert run.steps.get(step_id="talker").status == Step.Status.CANCELLED
