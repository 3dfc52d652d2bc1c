"""Loops, forEach and includes running on a real worker, with namespaced ids."""

from __future__ import annotations

import json

import pytest

from agents import repeat_loops
from runs import actions
from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import event_types, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str, **inputs) -> Run:
    return wait_for_run(do_create_run(register(name), inputs), timeout=60)


def statuses(run: Run) -> dict[str, str]:
    return dict(run.steps.exclude(kind="coordinator").values_list("step_id", "status"))


def test_it_repeats_a_loop_until_its_text_appears(celery_worker):
    run = wait_for_run(do_create_run(register("loop_review"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    assert statuses(run) == {
        "research": "completed",
        "refine": "completed",
        "refine.0.draft": "completed",
        "refine.0.review": "completed",
        "refine.1.draft": "completed",
        "refine.1.review": "completed",
        "publish": "completed",
    }
    loop_events = [(e.type, e.data.get("iteration")) for e in run.events.filter(step_id="refine")]
    assert loop_events == [("loop_iteration", 1), ("loop_end", None)]
    starts = [e.step_id for e in run.events.filter(type="step_start")]
    assert starts.index("refine.1.draft") > starts.index("refine.0.review")
    assert starts[-1] == "publish"
    # The second draft saw the first review.
    draft = run.steps.get(step_id="refine.1.draft")
    assert "Reviewed draft 0" in draft.transcript[1]["content"]
    # The step after the loop reads the last review (outputMode last), not why the loop ended.
    final = "Reviewed draft 1. Drafts APPROVED so far: 1"
    assert run.steps.get(step_id="refine").output == final
    assert f"## Output of step refine\n{final}" in run.steps.get(step_id="publish").transcript[1]["content"]


def test_it_runs_foreach_iterations_under_their_cap(celery_worker):
    run = wait_for_run(do_create_run(register("regions_foreach"), {"regions": "eu,us,asia"}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    assert {k: v for k, v in statuses(run).items() if k.startswith("deploy")} == {
        "deploy[0].ship": "completed",
        "deploy[1].ship": "completed",
        "deploy[2].ship": "completed",
    }
    assert run.steps.get(step_id="deploy[2].ship").output == "Shipped to asia."
    # maxConcurrency 2: the third region starts only after one of the first two ended.
    log = list(run.events.order_by("seq").values_list("type", "step_id"))
    first_end = min(log.index(("step_end", "deploy[0].ship")), log.index(("step_end", "deploy[1].ship")))
    assert log.index(("step_start", "deploy[2].ship")) > first_end
    assert log.index(("step_start", "summary")) > log.index(("step_end", "deploy[2].ship"))


def test_it_starts_foreach_iterations_in_the_order_of_the_list(celery_worker):
    regions = [f"r{n}" for n in range(12)]
    run = run_of("containers/foreach", regions=",".join(regions))

    assert run.status == Run.Status.COMPLETED
    starts = run.events.filter(type="step_start", step_id__endswith=".ship").order_by("seq")
    # Not deploy[0], deploy[10], deploy[11], deploy[1], ... as the ids sort.
    assert list(starts.values_list("step_id", flat=True)) == [f"deploy[{n}].ship" for n in range(12)]


def test_it_forwards_a_bare_id_to_the_senders_iteration(celery_worker):
    run = run_of("containers_run/each_relay")

    assert run.steps.get(step_id="deploy[0].check").output == "checked: shipped to eu"
    assert run.steps.get(step_id="deploy[1].check").output == "checked: shipped to us"
    forwards = [e.data["to"] for e in run.events.filter(type="message_sent", step_id="coordinator")]
    assert forwards == ["deploy[0].check", "deploy[1].check"]


def test_it_runs_an_included_workflow_under_the_include_id(celery_worker):
    run = run_of("containers_run/staged")

    assert run.status == Run.Status.COMPLETED
    assert [e.step_id for e in run.events.filter(type="step_start")] == ["staging.build", "staging.test", "announce"]
    assert run.steps.get(step_id="staging.build").output == "built staging-1"
    assert run.steps.get(step_id="staging.test").depends_on == ["staging.build"]
    assert run.steps.get(step_id="announce").depends_on == ["staging.test"]


def test_it_ends_a_loop_when_its_judge_says_yes(celery_worker):
    run = run_of("containers_run/judge_yes")

    assert statuses(run) == {"polish": "completed", "polish.0.draft": "completed"}
    judged = run.events.get(type="loop_judged")
    assert (judged.step_id, judged.data["done"], judged.data["answer"]) == ("polish", True, "Yes, ship it.")


def test_a_judge_ends_a_loop_with_its_submit_result_tool(celery_worker):
    run = run_of("containers_run/judge_tool")

    assert statuses(run) == {"polish": "completed", "polish.0.draft": "completed"}
    judged = run.events.get(type="loop_judged").data
    assert (judged["done"], json.loads(judged["answer"])) == (True, {"done": True, "reason": "reads well"})
    assert run.status == Run.Status.COMPLETED


def test_a_judge_whose_model_fails_lets_the_loop_go_on_to_its_end(celery_worker):
    run = run_of("containers_run/judge_down")

    assert statuses(run) == {"polish": "failed", "polish.0.draft": "completed", "polish.1.draft": "completed"}
    judged = [(e.data["done"], e.data["answer"]) for e in run.events.filter(type="loop_judged")]
    assert judged == [
        (False, "untilAgent judge failed (iteration 1): judge model down"),
        (False, "untilAgent judge failed (iteration 2): judge model down"),
    ]
    reason = "loop exhausted 2 iterations: judge agent never returned done"
    assert run.events.get(type="loop_end").data == {"status": "failed", "reason": reason}


def test_a_judged_loop_that_runs_out_of_iterations_fails_as_zenflows_does(celery_worker):
    run = run_of("containers_run/judge_no")

    assert statuses(run) == {"polish": "failed", "polish.0.draft": "completed", "polish.1.draft": "completed"}
    # The judge is asked after every iteration, the last one included.
    assert [e.data["done"] for e in run.events.filter(type="loop_judged")] == [False, False]
    end = run.events.get(type="loop_end").data
    assert end == {"status": "failed", "reason": "loop exhausted 2 iterations: judge agent never returned done"}
    assert run.status == Run.Status.PARTIAL  # its drafts completed


def test_it_fails_a_loop_whose_iteration_failed_and_cancels_its_dependents(celery_worker):
    run = run_of("containers_run/loop_fails")

    assert statuses(run) == {"refine": "failed", "refine.0.draft": "failed", "publish": "cancelled"}
    assert run.status == Run.Status.FAILED
    assert event_types(run)[-1] == "workflow_end"


def test_it_rejects_a_forward_to_a_container(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        run = actions.do_create_run(register("regions_foreach"), {})
    with django_capture_on_commit_callbacks(execute=False):
        actions.do_start_run(run.pk)
        result = actions.router_for(run.pk).forward("deploy", "hello")

    steps = "deploy[0].ship, deploy[1].ship, deploy[2].ship"
    assert result.text == f"rejected: deploy is a loop container; forward to one of its steps: [{steps}]"
    assert not run.events.filter(type="message_dropped").exists()
    assert not run.messages.exists()


def test_it_refuses_a_foreach_input_that_is_not_a_list():
    with pytest.raises(actions.InputError, match="not a valid JSON list"):
        actions.do_create_run(register("regions_foreach"), {"regions": "[eu,"})
    assert not Run.objects.exists()


def test_it_refuses_a_run_whose_loops_expand_past_the_most_steps_a_run_may_have():
    eleven = ",".join(f"x{n}" for n in range(11))
    with pytest.raises(actions.InputError, match="forEach loop 'outer' expands to more than 1,000 steps"):
        actions.do_create_run(register("containers/nested"), {"xs": eleven})
    assert not Run.objects.exists()


def test_it_fails_a_repeat_until_loop_whose_next_iteration_would_pass_the_runs_most_steps(celery_worker, monkeypatch):
    monkeypatch.setattr(repeat_loops, "MAX_RUN_STEPS", 5)
    run = run_of("containers/loop")

    # Iteration 0 ran; iteration 1's two steps would make the run's four six.
    assert statuses(run) == {
        "research": "completed",
        "refine": "failed",
        "refine.0.draft": "completed",
        "refine.0.review": "completed",
        "publish": "cancelled",
    }
    reason = "iteration 1 would add 2 steps to the run's 4; a run has at most 5"
    assert run.events.get(type="loop_end").data == {"status": "failed", "reason": reason}
    assert (run.status, run.error) == (Run.Status.PARTIAL, f"step refine failed: {reason}")


def test_it_shows_namespaced_steps_on_the_run_page(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("loop_review"), {}, user=owner), timeout=60)
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()

    for step_id in ("refine", "refine.0.draft", "refine.1.review", "publish"):
        assert f'id="step-{step_id}"' in page
    assert 'class="kind-loop depth-0"' in page
    assert 'class="kind-step depth-1"' in page
    # Later iterations show inside their loop, before the steps after it.
    assert page.index('id="step-refine.1.review"') < page.index('id="step-publish"')


def test_it_runs_a_for_each_loop_over_its_own_list(celery_worker):
    text = (
        "name: own_list\nagents:\n  shipper: {description: shipper agent, script: [{say: 'shipped $item'}]}\nsteps:\n"
        "  - id: deploy\n    loop:\n      forEach: [eu, us]\n      steps: [{id: ship, agent: shipper}]\n"
    )
    workflow, _ = actions.do_register_workflow(text, "own_list.yaml")

    run = wait_for_run(do_create_run(workflow, {}))

    assert run.status == Run.Status.COMPLETED
    assert dict(run.steps.filter(step_id__endswith=".ship").values_list("step_id", "output")) == {
        "deploy[0].ship": "shipped eu",
        "deploy[1].ship": "shipped us",
    }
