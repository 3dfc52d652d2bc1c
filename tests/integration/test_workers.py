"""spawn_worker: the coordinator adds worker steps to a running run."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str) -> Run:
    return wait_for_run(do_create_run(register(f"tools/{name}"), {}, command=f"run {name}"))


def seq_of(run: Run, type_: str, step_id: str) -> int:
    return run.events.get(type=type_, step_id=step_id).seq


def test_it_runs_the_workers_a_coordinator_plans(celery_worker):
    run = run_of("planned")

    assert run.status == Run.Status.COMPLETED
    workers = {s.step_id: s for s in run.steps.filter(kind=Step.Kind.STEP)}
    assert sorted(workers) == ["worker-1", "worker-2", "worker-3"]
    assert all(s.status == Step.Status.COMPLETED for s in workers.values())
    # The independent ones both started before either finished; the third waited for both.
    first_end = min(seq_of(run, "step_end", "worker-1"), seq_of(run, "step_end", "worker-2"))
    assert seq_of(run, "step_start", "worker-1") < first_end
    assert seq_of(run, "step_start", "worker-2") < first_end
    assert seq_of(run, "step_start", "worker-3") > max(
        seq_of(run, "step_end", "worker-1"), seq_of(run, "step_end", "worker-2")
    )
    assert_gapless(run)


def test_it_starts_a_worker_with_only_its_task_and_what_it_depends_on(celery_worker):
    run = run_of("planned")

    merger = run.steps.get(step_id="worker-3")
    prompt = merger.transcript[1]["content"]
    assert prompt.startswith("Merge both into a brief")
    assert "## Output of step worker-1\nworker-1 done" in prompt
    assert "## Output of step worker-2\nworker-2 done" in prompt
    # Nothing of the coordinator's conversation leaks into a worker.
    assert "Plan the work" not in str(merger.transcript)
    assert [m["role"] for m in merger.transcript] == ["system", "user", "assistant"]
    spawn_call = run.tool_calls.get(
        result=json.dumps({"result": {"step_id": "worker-3", "depends_on": ["worker-1", "worker-2"]}})
    )
    assert merger.spawned_by == spawn_call.tool_call_id
    assert merger.writes == ["prices.md", "brief.md"]


def test_it_refuses_a_worker_whose_write_target_clashes_and_names_the_holder(celery_worker):
    run = run_of("planned")

    clash = run.tool_calls.filter(step__step_id="coordinator", name="spawn_worker").order_by("id")[3]
    assert clash.ok is False
    assert clash.result.startswith("error: write conflict: worker-2 already writes reviews.md")
    assert not run.steps.filter(step_id="worker-4").exists()


def test_it_records_each_spawn_as_an_event(celery_worker):
    run = run_of("planned")

    spawned = list(run.events.filter(type="worker_spawned").order_by("seq"))
    assert [e.step_id for e in spawned] == ["worker-1", "worker-2", "worker-3"]
    assert spawned[2].data["depends_on"] == ["worker-1", "worker-2"]
    assert spawned[0].data["writes"] == ["prices.md"]
    # The coordinator's plan wake came first, before any worker ran.
    assert run.events.filter(type="agent_wake", step_id="coordinator").order_by("seq")[0].data["reason"] == "plan"


def test_it_caps_the_workers_of_a_run(celery_worker):
    run = run_of("capped")

    assert run.steps.filter(kind=Step.Kind.STEP).count() == 2
    third = run.tool_calls.filter(name="spawn_worker").order_by("id")[2]
    assert third.ok is False
    assert "this run already has 2 workers; the cap is 2 (maxWorkers)" in third.result
    assert run.status == Run.Status.COMPLETED


def test_it_keeps_the_hierarchy_at_two_levels(celery_worker):
    run = run_of("no_grandchildren")

    handed_down, delegator = run.tool_calls.filter(name="spawn_worker", step__step_id="coordinator").order_by("id")
    assert handed_down.ok is False
    assert "workers cannot use spawn_worker" in handed_down.result
    assert json.loads(delegator.result)["result"]["step_id"] == "worker-1"
    [asked] = run.tool_calls.filter(step__step_id="worker-1")
    assert asked.ok is False
    assert "tool 'spawn_worker' is not available to the step" in asked.result
    assert list(run.steps.filter(kind=Step.Kind.STEP).values_list("step_id", flat=True)) == ["worker-1"]
    assert run.status == Run.Status.COMPLETED
