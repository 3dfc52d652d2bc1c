"""Files shaped as zenflow's examples (written here: no agents, a chain, a
fan-out, a debate a judge ends, messaging, sampling and retries, a judged
single-step loop) each run to their end offline, on scripted agents. The
condition that skips, the retry that succeeds on its second attempt and the
exhausted loop are in test_zenflow_files_run.py."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import WORKFLOWS, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = sorted(path.stem for path in (WORKFLOWS / "zenflow" / "examples").glob("*.yaml"))


def run_example(name: str) -> Run:
    return wait_for_run(do_create_run(register(f"zenflow/examples/{name}"), {}), timeout=60)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_runs_to_its_end_with_every_step_completed(celery_worker, name):
    run = run_example(name)

    assert run.status == Run.Status.COMPLETED, run.error
    statuses = set(run.steps.values_list("status", flat=True))
    assert statuses == {"completed"}
    assert run.events.filter(type="workflow_end").count() == 1


def test_the_judge_ends_the_debate_after_its_first_round_with_submit_result(celery_worker):
    run = run_example("debate_until")

    done = set(run.steps.values_list("step_id", flat=True))
    assert {"rounds.0.pro-argue", "rounds.0.con-argue", "verdict"} <= done
    assert not any(step_id.startswith("rounds.1.") for step_id in done)
    judged = run.events.get(type="loop_judged", step_id="rounds").data
    assert (judged["iteration"], judged["done"]) == (0, True)
    end = run.events.get(type="loop_end", step_id="rounds").data
    assert end == {"status": "completed", "reason": "judge judged iteration 0 done"}
    # The verdict read the rounds' output, cumulative: under its iteration's heading.
    verdict = run.steps.get(step_id="verdict").transcript[1]["content"]
    assert "## Iteration 0\nAgainst: isolation." in verdict


def test_a_step_without_an_agent_runs_as_the_default_agent(celery_worker):
    run = run_example("minimal")

    assert run.steps.get(step_id="hello").agent == "default"
