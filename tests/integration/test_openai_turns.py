"""What a real model's turns may get wrong, answered as the model sees it:
through the real openai SDK against a local chat-completions server
(tests/fake_openai_server.py), on a real Celery worker. Each test reads the
requests the server received (what the model saw) and the run's stored outcome."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

HINT = "Your answer was empty: no text and no tool call."


def messages(endpoint, n: int) -> list[dict]:
    """The messages of the ``n``-th request (0-based) the endpoint received."""
    return endpoint.requests[n].body["messages"]


def test_it_answers_an_empty_answer_with_a_hint_and_then_fails_the_step(celery_worker, openai_endpoint):
    openai_endpoint.push_text("")
    openai_endpoint.push_text("  \n ")  # whitespace is no answer either
    openai_endpoint.push_text("")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    # Two hints (options.maxEmptyAnswerRetries defaults to 2), then the step fails.
    assert len(openai_endpoint.requests) == 3
    second, third = messages(openai_endpoint, 1), messages(openai_endpoint, 2)
    assert second[-2] == {"role": "assistant", "content": ""}
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith(HINT)
    assert "Retry 1 of 2" in second[-1]["content"]
    assert "Retry 2 of 2" in third[-1]["content"]
    step = run.steps.get(step_id="analyse")
    assert (step.status, step.error, step.output) == (Step.Status.FAILED, "empty answer from the model", "")
    assert run.status == Run.Status.FAILED
    assert run.error == "step analyse failed: empty answer from the model"


def test_a_model_that_answers_after_a_hint_completes_its_step(celery_worker, openai_endpoint):
    openai_endpoint.push_text("")
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    assert messages(openai_endpoint, 1)[-1]["content"].startswith(HINT)
    assert run.steps.get(step_id="analyse").output == "High tide at 6am."
    assert run.status == Run.Status.COMPLETED


def test_each_bad_call_of_a_turn_gets_its_own_error_and_the_model_its_next_turn(celery_worker, openai_endpoint):
    bad = [
        ("call_a", "send_message", json.dumps({"message": "wrong field"})),
        ("call_b", "no_such_tool", "{}"),
        ("call_c", "send_message", "{not json"),
        ("call_d", "write_file", json.dumps({"path": "x"})),
        ("call_e", "send_message", json.dumps({"text": ""})),
    ]
    openai_endpoint.push_tool_calls(bad)
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}))

    # Five failures in one turn are one failed turn: under the default
    # maxConsecutiveToolFailures of 5 the model gets to answer again.
    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="analyse").output == "High tide at 6am."
    answers = messages(openai_endpoint, 1)[-5:]
    assert [(m["role"], m["tool_call_id"]) for m in answers] == [("tool", call_id) for call_id, _, _ in bad]
    for message in answers:
        error, hint = message["content"].split("\n")
        assert error.startswith("error: ") and hint.startswith("retry_hint: {")
    assert "message" in answers[0]["content"] and "unknown tool 'no_such_tool'" in answers[1]["content"]
    assert "not valid JSON" in answers[2]["content"] and "not available to the step" in answers[3]["content"]
    # The hints the model reads, in the retry-hint vocabulary (docs/tools.md).
    hints = [json.loads(m["content"].split("\n")[-1].removeprefix("retry_hint: ")) for m in answers]
    assert [h["reason"] for h in hints] == [
        "invalid_arguments",  # text missing and message not a field
        "tool_unavailable",
        "invalid_arguments",
        "tool_unavailable",
        "invalid_arguments",
    ]
    assert hints[0]["tool"] == "send_message" and hints[0]["restrict_to_tool"] is True
    assert hints[0]["missing_fields"] == ["message", "text"]
    assert hints[0]["example_input"] == {"text": "..."} and hints[0]["prior_input"] == {"message": "wrong field"}
    assert hints[1]["clarifying_question"].startswith("Which of these tools fits")
    assert all(h["message"] for h in hints)
    stored = run.tool_calls.filter(step__step_id="analyse").order_by("id")
    assert [(call.tool_call_id, call.ok) for call in stored] == [(call_id, False) for call_id, _, _ in bad]


def test_no_request_follows_the_coordinators_finalize(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_f", "finalize", json.dumps({"summary": "Tides: high at 6am."}))])

    run = wait_for_run(do_create_run(register("openai_coordinator"), {}))

    assert (run.status, run.result) == (Run.Status.COMPLETED, "Tides: high at 6am.")
    # One request: the finish wake's. Its "finalized" is not read back to the model.
    assert len(openai_endpoint.requests) == 1


def test_a_coordinator_that_answers_its_summary_as_text_gives_the_run_its_result(celery_worker, openai_endpoint):
    # Real models often write the summary instead of calling finalize: the
    # run completes with that text, not with an empty result.
    openai_endpoint.push_text("Tides: high at 6am, low at noon.")

    run = wait_for_run(do_create_run(register("openai_coordinator"), {}))

    assert (run.status, run.result) == (Run.Status.COMPLETED, "Tides: high at 6am, low at noon.")
    assert run.events.get(type="coordinator_synthesis").data == {"summary": "Tides: high at 6am, low at noon."}
    assert len(openai_endpoint.requests) == 1


def test_a_finalize_with_an_empty_result_fails_the_run(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_f", "finalize", json.dumps({"summary": "  "}))])

    run = wait_for_run(do_create_run(register("openai_coordinator"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error == "coordinator: finalize with an empty result"
    assert run.result == ""
    assert len(openai_endpoint.requests) == 1


def test_a_coordinator_that_answers_nothing_at_the_finish_gets_hints_then_fails_the_run(celery_worker, openai_endpoint):
    for _ in range(3):
        openai_endpoint.push_text("")

    run = wait_for_run(do_create_run(register("openai_coordinator"), {}))

    assert len(openai_endpoint.requests) == 3
    hint = messages(openai_endpoint, 1)[-1]["content"]
    assert hint.startswith(HINT) and "finalize(summary) gives the run its result" in hint
    assert (run.status, run.error) == (Run.Status.FAILED, "coordinator: empty answer from the model")


def test_a_coordinator_that_must_plan_workers_cannot_finalize_before_spawning_one(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_1", "finalize", json.dumps({"summary": "Nothing to do."}))])
    task = json.dumps({"task": "Work it out.", "agent": "worker"})
    openai_endpoint.push_tool_calls([("call_2", "spawn_worker", task)])
    openai_endpoint.push_text("One worker planned.")
    openai_endpoint.push_tool_calls([("call_3", "finalize", json.dumps({"summary": "worker-1 worked it out"}))])

    run = wait_for_run(do_create_run(register("openai_planner"), {}))

    # The refusal is a tool error the model reads in its next turn, not a failed run.
    refusal = messages(openai_endpoint, 1)[-1]
    assert refusal["role"] == "tool" and refusal["tool_call_id"] == "call_1"
    assert refusal["content"].startswith("error: finalize refused: this workflow's coordinator must plan the work")
    assert "requireWorkers" in refusal["content"] and "retry_hint: " in refusal["content"]
    assert (run.status, run.result) == (Run.Status.COMPLETED, "worker-1 worked it out")
    assert run.steps.get(step_id="worker-1").output == "worked it out"
    assert len(openai_endpoint.requests) == 4


def test_a_run_whose_coordinator_must_plan_workers_and_planned_none_fails(celery_worker, openai_endpoint):
    openai_endpoint.push_text("Nothing to plan.")  # the plan wake
    openai_endpoint.push_tool_calls([("call_1", "finalize", json.dumps({"summary": "Done."}))])  # the finish wake
    openai_endpoint.push_text("Understood.")

    run = wait_for_run(do_create_run(register("openai_planner"), {}))

    assert messages(openai_endpoint, 2)[-1]["content"].startswith("error: finalize refused")
    assert run.status == Run.Status.FAILED
    assert run.error == (
        "coordinator: no worker was spawned, and this workflow's coordinator must plan workers (requireWorkers)"
    )
    assert run.result == ""


def test_a_coordinator_reads_its_workers_results_and_spawns_a_fix_up_that_runs(celery_worker, openai_endpoint):
    spawn = ("call_1", "spawn_worker", json.dumps({"task": "Collect the prices.", "agent": "worker"}))
    openai_endpoint.push_tool_calls([spawn])  # the plan wake
    openai_endpoint.push_text("One worker planned.")
    fix_up = json.dumps({"task": "Collect the reviews worker-1 missed.", "agent": "worker"})
    openai_endpoint.push_tool_calls([("call_2", "spawn_worker", fix_up)])  # the finish wake, after reading worker-1
    openai_endpoint.push_text("A fix-up collects the reviews.")
    both = "Prices from worker-1, reviews from worker-2."
    openai_endpoint.push_tool_calls([("call_3", "finalize", json.dumps({"summary": both}))])  # finish, again

    run = wait_for_run(do_create_run(register("openai_fixup"), {}))

    # Its second wake showed the model worker-1's result; its third, both.
    second, third = messages(openai_endpoint, 2)[-1]["content"], messages(openai_endpoint, 4)[-1]["content"]
    assert "- worker-1: worker-1 found three prices" in second and "worker-2" not in second
    assert "If the results miss something, spawn_worker a fix-up for it" in second
    assert "- worker-1: worker-1 found three prices" in third
    assert "- worker-2: worker-2 found three prices" in third
    assert run.steps.get(step_id="worker-2").status == Step.Status.COMPLETED
    assert (run.status, run.result) == (Run.Status.COMPLETED, both)
    assert len(openai_endpoint.requests) == 5
