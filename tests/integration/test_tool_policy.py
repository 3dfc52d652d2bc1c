"""Tool failures go back to the model with a retry hint; the run policy
stops a step that keeps failing or calls too many tools."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str) -> Run:
    return wait_for_run(do_create_run(register(f"policy/{name}"), {}))


def test_it_lets_a_model_repair_a_call_from_the_retry_hint(celery_worker):
    run = run_of("repairs")

    first, second = run.tool_calls.filter(step__step_id="learner").order_by("id")
    assert not first.ok
    hint = json.loads(first.result.splitlines()[-1].removeprefix("retry_hint: "))
    assert hint["fields"] == ["message", "text"]
    assert hint["example_input"] == {"text": "..."}
    assert (second.ok, second.result) == (True, "queued: msg-send-1")
    assert run.status == Run.Status.COMPLETED
    # The model saw the hint as the tool's result in its next turn.
    learner = run.steps.get(step_id="learner")
    assert learner.transcript[3] == {"role": "tool", "tool_call_id": first.tool_call_id, "content": first.result}


def test_it_fails_a_step_whose_tool_calls_keep_failing(celery_worker):
    run = run_of("clumsy")

    step = run.steps.get(step_id="clumsy")
    assert step.status == Step.Status.FAILED
    assert step.error == "step clumsy's last 3 tool calls all failed (maxConsecutiveToolFailures)"
    assert run.status == Run.Status.FAILED


def test_it_fails_a_step_past_its_tool_call_cap(celery_worker):
    run = run_of("chatty")

    step = run.steps.get(step_id="chatty")
    assert step.error == "step chatty made more than 2 tool calls (maxToolCalls)"
    # Three counted calls and one bookkeeping message that the cap ignores.
    assert run.tool_calls.filter(step=step).count() == 4
    assert run.tool_calls.filter(step=step, counted=False).get().name == "send_message"
