"""Steps of one run that end at the same moment, each in a worker thread
of its own on PostgreSQL.

Each step's last turn takes the run's lock and then writes, in one round
trip (runs/store/last_turn.py), and reads with that write the flags scheduling
needs; schedule() then decides on those flags without the lock. However the
turns interleave, the lock orders them and each write sees every turn
committed before it: exactly one turn, the last, sees every step done and
asks for the coordinator's finish wake (which its worker runs itself:
eager continuation). None would leave the run waiting with nothing on the
way; two would wake the coordinator twice."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from agents.router import COORDINATOR
from runs.actions import EagerWake, do_register_workflow
from runs.actions.steps import do_step_turn
from runs.models import Run, Step
from runs.store import last_turn

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

WIDTH = 8

WORKFLOW = """\
name: finish-together
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{say: done}]
steps:
""" + "".join(f"  - {{id: s{n}, agent: worker, instructions: Say done.}}\n" for n in range(WIDTH))


def _running_run() -> Run:
    workflow, _ = do_register_workflow(WORKFLOW, "tests/integration/test_steps_finish_together.py")
    run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING)
    Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
    Step.objects.bulk_create(
        Step(run=run, step_id=f"s{n}", agent="worker", instructions="Say done.", position=n, status=Step.Status.RUNNING)
        for n in range(WIDTH)
    )
    return run


@pytest.mark.parametrize("attempt", range(3))
def test_the_last_of_steps_ending_together_and_only_it_asks_for_the_finish_wake(attempt, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.fail(f"this pass runs on {connection.vendor}, not postgresql: see scripts/test.sh")
    run = _running_run()
    wakes: list[int] = []
    monkeypatch.setattr("runs.tasks.wake_coordinator.delay", wakes.append)
    # Every turn has its answer before any writes it: they all reach the
    # run's lock at once.
    together = threading.Barrier(WIDTH, timeout=30)
    write = last_turn.write

    def write_together(*args, **kwargs):
        together.wait()
        return write(*args, **kwargs)

    monkeypatch.setattr(last_turn, "write", write_together)

    def turn(step_pk: int):
        try:
            return do_step_turn(step_pk, 1)
        finally:
            connection.close()  # this thread's own connection

    steps = list(run.steps.filter(kind=Step.Kind.STEP).values_list("pk", flat=True))
    with ThreadPoolExecutor(WIDTH) as pool:
        follows = [follow for follow in pool.map(turn, steps) if follow is not None]

    statuses = list(run.steps.filter(kind=Step.Kind.STEP).values_list("status", flat=True))
    assert statuses == [Step.Status.COMPLETED] * WIDTH
    assert follows == [EagerWake(run.pk)], f"{len(follows)} finish wakes asked for, not one"
    assert wakes == []  # the worker runs it: no task
    run.refresh_from_db()
    # Marked queued: had that worker died, the sweeper would queue it.
    assert run.wake_requests == 1 and run.wake_queued is not None
    assert run.events.filter(type="step_end").count() == WIDTH
