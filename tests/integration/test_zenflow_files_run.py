"""zenflow's workflow files on zenweb: what zenweb runs of them runs (a
default agent, a prompt from a file, named includes, a forEach over its own
list, a single-step loop; an agent's prompt, temperature, topP and maxTurns
reach the model call), and a file using what zenweb does not run yet starts
no run."""

from __future__ import annotations

import re

import pytest

from agents.events.registry import parse
from runs.actions import do_create_run
from runs.actions.catalog import InputError
from runs.actions.tool_host import workspace_of
from runs.models import Approval, Run
from runs.templatetags.event_summary import summary_of
from tests.conftest import register, wait_for, wait_for_run
from tests.runtime.openai_requests import RETRY_SOON

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_file_in_zenflow_s_language_runs_to_its_end_offline(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/language"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    done = set(run.steps.filter(status="completed").values_list("step_id", flat=True))
    assert {"plan", "draft", "regions[0].regions", "regions[1].regions", "rounds.1.rounds"} <= done
    assert {"release.push", "again.push"} <= done


def test_a_false_condition_skips_its_step_and_the_steps_after_it_go_on(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/condition"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    statuses = dict(run.steps.values_list("step_id", "status"))
    assert statuses == {
        "coordinator": "completed",
        "check": "completed",
        "fix": "skipped",
        "report": "completed",
        "page": "skipped",
        "close": "completed",
    }
    skipped = {e.step_id: e.data["reason"] for e in run.events.filter(type="step_skipped")}
    assert skipped["fix"] == "condition false: steps.check.content.contains('unhealthy')"
    assert skipped["page"].startswith("condition read what no finished step gave")
    assert not run.events.filter(type="step_start", step_id__in=["fix", "page"]).exists()
    # zenflow's note of a condition that read missing data, before the skip.
    (note,) = run.events.filter(type="message")
    assert (note.step_id, note.data) == (
        "page",
        {"text": "condition eval: missing data, skipping step", "reason": "condition"},
    )
    assert note.seq < run.events.get(type="step_skipped", step_id="page").seq


def test_a_condition_that_fails_under_abort_lapses_approvals_and_cancels_child_runs(celery_worker, owner):
    register("tools/slow_topic")
    run = do_create_run(register("zenflow/condition_abort"), {}, user=owner)
    approval = wait_for(lambda: run.approvals.filter(status=Approval.Status.PENDING).first())
    wait_for(lambda: Run.objects.filter(parent_tool_call__run=run).first())

    run = wait_for_run(run)

    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {"build": "cancelled", "caller": "cancelled", "wait": "completed", "breaker": "failed"}
    approval.refresh_from_db()
    assert approval.status == Approval.Status.LAPSED
    assert approval.reason == "step build was cancelled: run aborted: a step's condition failed"
    child = wait_for_run(Run.objects.get(parent_tool_call__run=run))
    assert (child.status, child.error) == (Run.Status.CANCELLED, f"parent step caller of run {run.pk} ended cancelled")
    assert run.steps.get(step_id="breaker").error.startswith("condition: ")
    assert run.status == Run.Status.PARTIAL


def test_step_ids_with_capitals_run_as_zenflow_s_do(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/capitals"), {}), timeout=60)

    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {
        "Build": "completed",
        "Deploy-Prod": "completed",
        "Review": "completed",
        "Review.0.Check": "completed",
    }
    assert run.status == Run.Status.COMPLETED


def test_a_condition_inside_a_repeat_until_loop_reads_its_own_iteration(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/loop_condition"), {}), timeout=60)

    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {
        "cycle": "completed",
        "cycle.0.check": "completed",
        "cycle.0.fix": "completed",
        "cycle.1.check": "completed",
        "cycle.1.fix": "skipped",
        "report": "completed",
    }
    skipped = run.events.get(type="step_skipped", step_id="cycle.1.fix").data["reason"]
    assert skipped == "condition false: steps.check.content == 'round 0'"
    assert run.events.get(type="loop_end", step_id="cycle").data["status"] == "completed"


def test_a_loop_s_delay_is_a_wait_between_its_iterations(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/loop_delay"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    first, second = run.steps.get(step_id="cycle.0.work"), run.steps.get(step_id="cycle.1.work")
    assert (second.started - first.finished).total_seconds() >= 1
    (note,) = run.events.filter(type="message", step_id="cycle")
    assert note.data == {"text": "waiting 1s (the loop's delay) before iteration 1", "reason": "loop-delay"}
    iteration = run.events.get(type="loop_iteration", step_id="cycle")
    assert note.seq < iteration.seq


def test_the_round_robin_scheduler_starts_one_step_of_each_agent_in_turn(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/round_robin"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    starts = list(run.events.filter(type="step_start").order_by("seq").values_list("step_id", flat=True))
    assert starts == ["a1", "b1", "a2"]


def test_a_cel_until_ends_its_loop_and_the_step_after_it_runs(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/until"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    done = set(run.steps.filter(status="completed").values_list("step_id", flat=True))
    assert {"cycle.0.fix", "cycle.1.fix", "cycle", "report"} <= done
    assert not run.steps.filter(step_id__startswith="cycle.2.").exists()
    end = run.events.get(type="loop_end", step_id="cycle").data
    assert end == {
        "status": "completed",
        "reason": "until \"steps.fix.content.contains('round 1') && iteration == 1\" held",
    }


def test_a_loop_whose_cel_until_never_holds_fails_after_its_iterations(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/until_exhausted"), {}), timeout=60)

    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {
        "cycle": "failed",
        "cycle.0.fix": "completed",
        "cycle.1.fix": "completed",
        "report": "cancelled",
    }
    reason = "loop exhausted 2 iterations: until condition never became true"
    assert run.events.get(type="loop_end", step_id="cycle").data == {"status": "failed", "reason": reason}
    assert run.steps.get(step_id="cycle").error == reason
    assert run.status == Run.Status.PARTIAL


def test_a_failed_step_retries_as_a_fresh_attempt_whose_tool_calls_are_its_own(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/retry"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    write = run.steps.get(step_id="write")
    assert (write.status, write.attempt, write.output) == ("completed", 1, "wrote out.txt again")
    assert run.steps.get(step_id="report").status == "completed"
    retry = run.events.get(type="step_retry", step_id="write").data
    assert retry == {"attempt": 2, "error": "the model went away"}
    assert summary_of(parse("step_retry", retry)) == "attempt 2, the one before failed: the model went away"
    # Each attempt ran its own write once: two journal entries, one run each,
    # and the first attempt's call kept apart from the second's.
    executions = list(write.tool_executions.values_list("name", "attempts"))
    assert executions == [("write_file", 1), ("write_file", 1)]
    calls = sorted(write.tool_calls.values_list("tool_call_id", "turn_id"))
    assert calls == [("call-writer-1-1", "write/1/attempt-1"), ("call-writer-1-1@attempt-0", "write/1")]
    assert (workspace_of(run.pk) / "out.txt").read_text() == "written"


def test_a_step_that_fails_every_attempt_fails_after_its_retries(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/retry_fails"), {}), timeout=60)

    step = run.steps.get(step_id="flaky")
    assert (step.status, step.attempt, step.error) == ("failed", 2, "down again")
    assert [e.data["attempt"] for e in run.events.filter(type="step_retry")] == [2, 3]
    assert run.steps.get(step_id="after").status == "cancelled"
    assert run.status == Run.Status.FAILED


def test_a_step_s_own_timeout_fails_it_naming_the_timeout_and_others_keep_the_workflow_s(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/own_timeout"), {}), timeout=60)

    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {"slow": "failed", "after": "skipped", "roomy": "completed"}
    slow = run.steps.get(step_id="slow")
    assert re.fullmatch(r"step slow ran \d+\.\ds, past timeout \(0\.5s\)", slow.error)
    assert (slow.turns, slow.output) == (0, "")  # the late answer is not the step's


def test_a_step_s_max_retries_and_the_workflow_s_bound_its_model_call_s_retries(celery_worker, openai_endpoint):
    openai_endpoint.push_error(500, "The server had an error.", headers=RETRY_SOON)
    openai_endpoint.push_text("One line.")
    openai_endpoint.push_error(500, "The server had an error.", headers=RETRY_SOON)
    openai_endpoint.push_text("never asked for")

    run = wait_for_run(do_create_run(register("zenflow/model_retries"), {}))

    patient, hasty = run.steps.get(step_id="patient"), run.steps.get(step_id="hasty")
    assert (patient.status, patient.output) == ("completed", "One line.")
    assert hasty.status == "failed" and "500" in hasty.error
    assert len(openai_endpoint.requests) == 3


def test_a_run_of_a_file_using_what_zenweb_does_not_run_yet_is_refused_naming_field_step_and_line():
    workflow = register("zenflow/not_run")

    with pytest.raises(InputError) as caught:
        do_create_run(workflow, {})

    message = str(caught.value)
    assert message.endswith(
        "uses what zenweb does not run yet, so no run starts: "
        "steps[1].retries (step deploy, line 13): retries of a loop or an include (a step's retries run)"
    )
    assert not Run.objects.exists()


def test_an_agent_s_prompt_temperature_top_p_and_max_turns_reach_the_model(celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_1", "send_message", '{"text": "tides are high"}')])
    openai_endpoint.push_text("never asked for")

    run = wait_for_run(do_create_run(register("zenflow/sampled"), {}))

    (request,) = (r.body for r in openai_endpoint.requests)
    assert request["messages"][0]["content"].startswith("You analyse tides.")
    assert (request["temperature"], request["top_p"]) == (0.3, 0.5)
    step = run.steps.get(step_id="analyse")
    assert (step.status, step.error) == ("failed", "step analyse did not finish within maxTurns (1)")


def test_a_step_s_context_files_are_in_what_the_model_is_asked(celery_worker, openai_endpoint):
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("zenflow/context"), {}))

    assert run.status == Run.Status.COMPLETED
    (request,) = (r.body for r in openai_endpoint.requests)
    assert request["messages"][1]["content"] == (
        "Analyse the tides.\n\n## Context file parts/notes.md\nTides peak at 6am; costs are $5 a ticket."
    )


def test_a_loop_s_false_condition_skips_the_whole_loop_and_the_steps_after_it_go_on(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/loop_own_condition"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {
        "check": "completed",
        "repair": "skipped",
        "repair.0.look": "skipped",
        "repair.0.fix": "skipped",
        "page[0].page": "skipped",
        "page[1].page": "skipped",
        "notify[0].notify": "completed",
        "report": "completed",
    }
    started = set(run.events.filter(type="step_start").values_list("step_id", flat=True))
    assert started == {"check", "notify[0].notify", "report"}
    skipped = run.events.get(type="step_skipped", step_id="repair").data["reason"]
    assert skipped == "loop repair's condition false: steps.check.content.contains('unhealthy')"
    assert not run.events.filter(type__in=["loop_iteration", "loop_end"], step_id="repair").exists()


def test_a_cel_until_reads_a_step_its_condition_skipped_as_skipped(celery_worker):
    run = wait_for_run(do_create_run(register("zenflow/until_skipped"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    statuses = dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))
    assert statuses == {
        "cycle": "completed",
        "cycle.0.check": "completed",
        "cycle.0.fix": "completed",
        "cycle.1.check": "completed",
        "cycle.1.fix": "skipped",
    }
    end = run.events.get(type="loop_end", step_id="cycle").data
    assert (end["status"], end["reason"]) == ("completed", "until \"steps.fix.status == 'skipped'\" held")
