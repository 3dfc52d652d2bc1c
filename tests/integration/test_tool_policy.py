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
    assert hint["missing_fields"] == ["message", "text"]
    assert hint["example_input"] == {"text": "..."}
    assert (second.ok, second.result) == (True, '{"result": {"status": "queued", "message_id": "msg-send-1"}}')
    assert run.status == Run.Status.COMPLETED
    # The model saw the hint as the tool's result in its next turn.
    learner = run.steps.get(step_id="learner")
    assert learner.transcript[3] == {"role": "tool", "tool_call_id": first.tool_call_id, "content": first.result}


def test_it_fails_a_step_whose_tool_calls_keep_failing(celery_worker):
    run = run_of("clumsy")

    step = run.steps.get(step_id="clumsy")
    assert step.status == Step.Status.FAILED
    assert step.error == "step clumsy's tool calls all failed in its last 3 turns (maxConsecutiveToolFailures)"
    assert run.status == Run.Status.FAILED


def test_it_fails_a_step_that_asks_for_a_call_past_its_tool_call_cap(celery_worker):
    run = run_of("chatty")

    step = run.steps.get(step_id="chatty")
    assert step.error == "step chatty asked for more than 2 tool calls (maxToolCalls)"
    # Two counted calls and one bookkeeping message that the cap ignores ran;
    # the third glob did not, and its result says why.
    assert run.tool_calls.filter(step=step, counted=True).count() == 2
    assert run.tool_calls.filter(step=step, counted=False, ok=True).get().name == "send_message"
    refused = run.tool_calls.filter(step=step, ok=False).get()
    assert refused.name == "glob"
    assert refused.result.startswith("error: the step has made all 2 tool calls it may make (maxToolCalls)")


def test_it_refuses_each_call_of_a_turn_asking_for_more_than_is_left_and_goes_on(celery_worker):
    run = run_of("greedy")

    step = run.steps.get(step_id="greedy")
    assert (step.status, step.output) == (Step.Status.COMPLETED, "done with three globs")
    turn2 = list(run.tool_calls.filter(step=step, turn_id="greedy/2"))
    assert len(turn2) == 3 and not any(call.ok for call in turn2)
    for call in turn2:
        assert call.result.startswith(
            "error: this turn asks for 3 tool calls and the step has 2 of 3 left (maxToolCalls); "
            "none of them ran: ask for at most 2"
        )
    # The model read one refusal per call, each under its own call id.
    answers = {m["tool_call_id"]: m["content"] for m in step.transcript if m["role"] == "tool"}
    assert all(answers[call.tool_call_id] == call.result for call in turn2)
    assert [call.ok for call in run.tool_calls.filter(step=step, turn_id="greedy/3")] == [True, True]


def test_it_counts_a_turn_of_failed_calls_once_against_consecutive_failures(celery_worker):
    run = run_of("fumbles")

    step = run.steps.get(step_id="fumbles")
    # Three bad calls in one turn with maxConsecutiveToolFailures 2: one failed turn.
    assert [call.ok for call in run.tool_calls.filter(step=step)] == [False, False, False, True]
    assert (step.status, step.output) == (Step.Status.COMPLETED, "fixed it")
    assert run.status == Run.Status.COMPLETED
