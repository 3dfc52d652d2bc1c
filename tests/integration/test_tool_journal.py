"""Side effects once: a turn retried after its worker died reuses the results
of the side-effecting calls it had already run (the tool journal)."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run, do_start_run
from runs.actions import steps as step_actions
from runs.models import Step, ToolExecution
from tests.conftest import register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]


class WorkerDied(Exception):
    """Stands in for a worker killed after its tools ran, before the turn was recorded."""


@pytest.fixture
def step(settings, tmp_path) -> Step:
    settings.ZENWEB_WORKSPACES = tmp_path
    run = do_create_run(register("tools/appender"), {})
    do_start_run(run.pk)  # no worker here: the test takes the turns itself
    return Step.objects.get(run=run, step_id="append")


def effects(settings, step: Step) -> str:
    return (settings.ZENWEB_WORKSPACES / f"run-{step.run_id}" / "effects.log").read_text()


def test_it_does_not_repeat_a_finished_side_effect_when_a_turn_is_retried(step, settings, monkeypatch):
    def die(*args, **kwargs):
        raise WorkerDied

    with monkeypatch.context() as patch:
        patch.setattr(step_actions, "save_turn", die)
        with pytest.raises(WorkerDied):
            step_actions.do_step_turn(step.pk, 1)
    step.refresh_from_db()
    assert step.turns == 0  # the turn was not recorded
    assert effects(settings, step) == "once\n"

    step_actions.do_step_turn(step.pk, 1)

    step.refresh_from_db()
    assert step.turns == 1
    assert effects(settings, step) == "once\n"
    call = step.tool_calls.get(name="run_shell")
    assert call.ok and json.loads(call.result) == {"result": {"exit_code": 0, "output": "1\n"}}
    execution = ToolExecution.objects.get(step=step)
    assert (execution.status, execution.attempts) == ("done", 1)


def test_it_runs_again_a_call_whose_worker_died_mid_way(step, settings, monkeypatch):
    original_finish = step_actions.DjangoToolJournal.finish

    def die_before_finishing(self, key, outcome):
        raise WorkerDied

    with monkeypatch.context() as patch:
        patch.setattr(step_actions.DjangoToolJournal, "finish", die_before_finishing)
        with pytest.raises(WorkerDied):
            step_actions.do_step_turn(step.pk, 1)
    assert ToolExecution.objects.get(step=step).status == "running"

    step_actions.do_step_turn(step.pk, 1)

    execution = ToolExecution.objects.get(step=step)
    assert (execution.status, execution.attempts) == ("done", 2)
    assert step_actions.DjangoToolJournal.finish is original_finish
    # An interrupted call runs again: tools are at least once, finished ones exactly once.
    assert effects(settings, step) == "once\nonce\n"
