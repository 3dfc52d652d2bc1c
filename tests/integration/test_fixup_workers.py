"""The coordinator iterates: woken with its workers' results, it spawns
fix-ups, which run; the run ends once it finalizes with nothing left to run."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import assert_gapless, register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str) -> Run:
    return wait_for_run(do_create_run(register(f"tools/{name}"), {}, command=f"run {name}"))


def wakes_of(run: Run) -> list[str]:
    return [e.data["reason"] for e in run.events.filter(type="agent_wake", step_id="coordinator").order_by("seq")]


def test_a_fix_up_spawned_after_reading_the_results_runs_and_is_in_the_result(celery_worker):
    run = run_of("fixup")

    workers = {s.step_id: s.status for s in run.steps.filter(kind=Step.Kind.STEP)}
    assert workers == {"worker-1": Step.Status.COMPLETED, "worker-2": Step.Status.COMPLETED}
    assert run.status == Run.Status.COMPLETED
    assert "worker-1: worker-1 done" in run.result
    assert "worker-2: worker-2 done" in run.result
    # Woken to finish once worker-1 was done, and again once its fix-up was.
    assert wakes_of(run) == ["plan", "finish", "finish"]
    assert_gapless(run)


def test_a_finalize_in_the_answer_that_spawns_a_fix_up_is_refused(celery_worker):
    run = run_of("fixup")

    early = run.tool_calls.get(name="finalize", tool_call_id="call-coordinator-3-2")
    assert early.ok is False
    assert early.result.startswith("error: finalize refused: workers spawned in this wake have not run yet (1)")
    assert run.result != "Only the prices."


def test_a_fix_up_past_the_wake_cycle_cap_is_refused_and_the_run_ends_with_what_it_has(celery_worker):
    run = run_of("fixup_capped")

    refused = run.tool_calls.filter(name="spawn_worker").order_by("id")[1]
    assert refused.ok is False
    assert "the coordinator has taken 2 of its 2 wake cycles (maxWakeCycles)" in refused.result
    assert "finalize with what the workers found" in refused.result
    assert list(run.steps.filter(kind=Step.Kind.STEP).values_list("step_id", "status")) == [
        ("worker-1", Step.Status.COMPLETED)
    ]
    assert (run.status, run.result) == (Run.Status.COMPLETED, "Only the prices: no fix-up could run.")
    assert wakes_of(run) == ["plan", "finish"]
    # Its finish prompt said so before it asked.
    transcript = run.steps.get(step_id="coordinator").transcript
    [finish] = [m["content"] for m in transcript if "Every step has finished" in str(m.get("content"))]
    assert "No worker can be added: this is wake 2 of 2 (maxWakeCycles)." in finish


def test_a_fix_up_for_a_failed_worker_runs_and_one_that_waits_for_it_is_refused(celery_worker):
    run = run_of("fixup_after_failure")

    waits, redo = run.tool_calls.filter(name="spawn_worker", step__step_id="coordinator").order_by("id")[1:]
    assert waits.ok is False
    assert "this worker would never start: it depends on worker-1 ended failed" in waits.result
    assert json.loads(redo.result)["result"]["step_id"] == "worker-2"
    steps = dict(run.steps.filter(kind=Step.Kind.STEP).values_list("step_id", "status"))
    assert steps == {"worker-1": Step.Status.FAILED, "worker-2": Step.Status.COMPLETED}
    # One step failed and its fix-up completed: partial, with the fix-up's output in the result.
    assert run.status == Run.Status.PARTIAL
    assert "worker-2: worker-2 done" in run.result


def test_a_commands_answer_over_the_api_waits_for_the_fix_up_and_holds_both_outputs(celery_worker, owner):
    register("tools/fixup")
    client = api(owner)

    body = post(client, "/api/commands?wait=30", {"command": "Run the fixup workflow"}).json()

    assert (body["status"], body["run"]["status"]) == ("success", "completed")
    summary = body["result"]["result"]["summary"]
    assert "worker-1: worker-1 done" in summary and "worker-2: worker-2 done" in summary
    steps = {s["step_id"]: s["status"] for s in client.get(f"/api/runs/{body['run']['id']}").json()["steps"]}
    assert steps == {"coordinator": "completed", "worker-1": "completed", "worker-2": "completed"}


def test_the_run_page_shows_the_fix_up_completed_and_both_outputs_in_the_result(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("tools/fixup"), {}, user=owner))
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    fix_up = html.split('<tbody id="step-worker-2" class="step">')[1].split("</tbody>")[0]
    assert 'data-status="completed"' in fix_up and "spawned by the coordinator" in fix_up
    result = html.split('<div class="run-result">')[1].split("</div>")[0]
    assert "worker-1: worker-1 done" in result and "worker-2: worker-2 done" in result
