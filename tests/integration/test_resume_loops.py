"""Resume gets a repeat-until loop going again when the task its ended
iteration waited on was lost: end_iteration, judge_loop, next_iteration."""

from __future__ import annotations

import pytest

from runs import queue
from runs.actions import do_create_run
from runs.actions.recovery import do_resume_run
from runs.actions.step_ends import do_judge_loop
from runs.models import Run
from tests.conftest import register, wait_for, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def lose_first(monkeypatch, task: str) -> list[tuple]:
    """The broker loses the first ``task`` sent; returns what it lost."""
    lost: list[tuple] = []
    send, send_in = queue.send_after_commit, queue.send_after_commit_in

    def dropping(name, *args):
        if name == task and not lost:
            lost.append(args)
            return
        send(name, *args)

    def dropping_in(seconds, name, *args):
        if name == task and not lost:
            lost.append(args)
            return
        send_in(seconds, name, *args)

    monkeypatch.setattr(queue, "send_after_commit", dropping)
    monkeypatch.setattr(queue, "send_after_commit_in", dropping_in)
    return lost


@pytest.mark.parametrize(
    ("workflow", "task", "stuck"),
    [
        # The until is read after iteration 1, whose last step was skipped for its condition.
        ("zenflow/loop_condition", queue.END_ITERATION, {"type": "step_skipped", "step_id": "cycle.1.fix"}),
        ("containers_run/judge_yes", queue.JUDGE_LOOP, {"type": "loop_judge", "step_id": "polish"}),
        ("zenflow/loop_delay", queue.NEXT_ITERATION, {"type": "message", "step_id": "cycle"}),
    ],
)
def test_a_loop_whose_next_task_was_lost_ends_after_resume(celery_worker, monkeypatch, workflow, task, stuck):
    lost = lose_first(monkeypatch, task)
    run = do_create_run(register(workflow), {})
    wait_for(lambda: lost and run.events.filter(**stuck).exists())
    loop = run.steps.get(kind="loop")
    assert loop.status == "running"
    # Nothing runs that would move it on.
    assert not run.steps.filter(kind="step", status="running").exists()

    assert loop.step_id in do_resume_run(run.pk, "test")

    run = wait_for_run(run, timeout=60)
    assert run.status == Run.Status.COMPLETED
    loop.refresh_from_db()
    assert loop.status == "completed"
    assert run.events.filter(type="loop_end", step_id=loop.step_id).count() == 1


def test_a_judge_loop_task_that_runs_twice_judges_once(celery_worker, monkeypatch):
    """Resume queues a judge_loop again when its loop waits on one: if the
    first was only late, the second finds the iteration judged."""
    lost = lose_first(monkeypatch, queue.JUDGE_LOOP)
    run = do_create_run(register("containers_run/judge_no"), {})
    wait_for(lambda: lost)

    do_judge_loop(*lost[0])
    do_judge_loop(*lost[0])

    run = wait_for_run(run, timeout=60)
    # The judge never says done: the loop runs its two iterations, once each, and fails.
    assert run.status == Run.Status.PARTIAL
    assert list(run.steps.filter(step_id__startswith="polish.").values_list("step_id", flat=True)) == [
        "polish.0.draft",
        "polish.1.draft",
    ]
    judged = run.events.filter(type="loop_judged", step_id="polish")
    assert [e.data["iteration"] for e in judged.order_by("seq")] == [0, 1]
