"""Eager continuation on PostgreSQL: a completion that starts exactly one
step hands that step's first turn to the same worker (no broker hop), with
the durability of any claimed turn: the step starts with that worker's
lease on the turn, so a worker that dies before recording it leaves a lease
that runs out and the sweeper hands on (runs/sweeper.py), not a step
running forever."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from runs import tasks
from runs.actions import do_create_run, do_register_workflow
from runs.models import Run, Step
from runs.sweeper import BROKER_MARK, do_sweep
from tests.conftest import wait_for, wait_for_run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

CHAIN = """\
name: eager-chain
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{say: done}]
steps:
  - {id: s1, agent: worker, instructions: Say done.}
  - {id: s2, agent: worker, instructions: Say done., dependsOn: [s1]}
  - {id: s3, agent: worker, instructions: Say done., dependsOn: [s2]}
"""


def _chain():
    workflow, _ = do_register_workflow(CHAIN, "tests/integration/test_eager_continuation.py")
    return workflow


def _recorded(monkeypatch, task) -> list[tuple]:
    """The arguments of each ``task`` queued from now on (still queued)."""
    calls: list[tuple] = []
    publish = task.apply_async

    def apply_async(args=None, kwargs=None, *rest, **options):
        calls.append(tuple(args))
        return publish(args, kwargs, *rest, **options)

    monkeypatch.setattr(task, "apply_async", apply_async)
    return calls


def test_a_chain_runs_its_steps_and_its_finish_without_queueing_them(celery_worker, owner, monkeypatch):
    queued = _recorded(monkeypatch, tasks.run_step_turn)
    woken = _recorded(monkeypatch, tasks.wake_coordinator)
    run = wait_for_run(do_create_run(_chain(), {}, user=owner))

    assert run.status == Run.Status.COMPLETED
    assert [step.output for step in run.steps.filter(kind=Step.Kind.STEP).order_by("position")] == ["done"] * 3
    # No step's turn went through the broker: the run's start took the
    # first, each completion the next; and the last one the finish wake.
    assert queued == []
    assert woken == []
    assert [e.type for e in run.events.order_by("seq")][-2:] == ["agent_idle", "workflow_end"]


def test_a_worker_that_dies_after_an_eager_start_leaves_the_turn_to_the_sweeper(celery_worker, owner, monkeypatch):
    handed: list[int] = []

    def dies(follow) -> None:
        # The worker is gone once the successor's start committed: its turn is never taken here.
        if follow is not None:
            handed.append(follow.step_pk)

    monkeypatch.setattr(tasks, "_continue_eagerly", dies)
    # A broker a sweeper has seen before: without its mark, the first sweep
    # takes the broker for one that lost its data and resumes the whole run.
    redis.Redis.from_url(django_settings.CELERY_BROKER_URL).set(BROKER_MARK, "seen")
    run = do_create_run(_chain(), {}, user=owner)
    # The run's start took its first step eagerly, and the worker died.
    s1 = Step.objects.get(pk=wait_for(lambda: handed)[0])

    # Started with the dead worker's lease on its first turn, and not queued.
    assert (s1.step_id, s1.status, s1.turns, s1.turn_queued) == ("s1", Step.Status.RUNNING, 0, None)
    assert s1.lease_owner != "" and s1.lease_expires > timezone.now()
    # While the lease lasts the sweeper leaves it alone.
    assert do_sweep()["expired"] == 0

    monkeypatch.undo()
    Step.objects.filter(pk=s1.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    assert do_sweep()["expired"] == 1
    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="s3").output == "done"
    assert run.events.filter(type="lease_expired", step_id="s1").count() == 1
