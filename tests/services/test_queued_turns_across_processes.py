"""A wide fan-out on two worker processes: its first turns wait in the run
and both processes take them (take_queued_turns), every turn once, with
a few tasks on the broker instead of one per step."""

from __future__ import annotations

import re

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import assert_gapless, wait_for_run
from tests.integration.test_queued_turns import register_text, wide
from tests.services.conftest import workers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_two_worker_processes_take_a_fan_outs_first_turns_each_once(tmp_path):
    workflow = register_text(wide(60))
    with workers(tmp_path, "queue-a", "queue-b") as logs:
        run = wait_for_run(do_create_run(workflow, {}), timeout=90)
        received = [log.read_text() for log in logs]

    assert run.status == Run.Status.COMPLETED
    steps = run.steps.filter(kind="step")
    assert steps.count() == 60 and not steps.exclude(turns=1).exists()
    for kind in ("step_start", "agent_turn", "step_end"):
        by_step = list(run.events.filter(type=kind).exclude(step_id="coordinator").values_list("step_id", flat=True))
        assert sorted(by_step) == sorted(steps.values_list("step_id", flat=True)), kind
    assert_gapless(run)
    # Both processes took turns from the run; no first turn was a task of its
    # own, and the broker carried a few tasks (a worker child that joined,
    # one handed on after its time), not 60.
    tasks = [len(re.findall(r"runs\.tasks\.take_queued_turns\[[^]]+\] received", text)) for text in received]
    assert all(count >= 1 for count in tasks), tasks
    assert sum(tasks) <= 30, tasks
    assert not any("runs.tasks.run_step_turn[" in text for text in received)
