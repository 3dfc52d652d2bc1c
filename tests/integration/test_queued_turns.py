"""A start that starts several steps leaves their first turns queued in the
run, and workers take them from there (take_queued_turns) instead of a
broker task each: every turn once, in the order the steps start, workers
joining while turns wait, nothing taken from a run that stopped."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from celery.signals import task_prerun
from django.db import connection, transaction
from django.utils import timezone

from runs import tasks
from runs.actions import do_create_run, do_register_workflow
from runs.models import Run, Step
from runs.store.sql import queued_turns, store
from tests.conftest import wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def wide(items: int, delay: float = 0.0) -> str:
    """A workflow of one forEach loop over ``items`` items, every iteration
    started at once, each turn taking ``delay`` seconds."""
    return f"""\
name: wide
inputs:
  items: {{type: string, default: "{",".join(f"item-{n}" for n in range(items))}"}}
options:
  maxConcurrency: {items}
agents:
  worker:
    description: worker agent
    script: [{{say: "done $item", delay: {delay}}}]
steps:
  - id: each
    loop:
      forEach: items
      maxConcurrency: {items}
      steps:
        - {{id: work, agent: worker, instructions: "Handle $item."}}
"""


def _claim(run: Run, owner: str = "w1", after: int = 0):
    now = timezone.now()
    return store().claim_queued_first_turn(run.pk, owner, now + timedelta(seconds=60), now, after)


def _queue_first_turns(run: Run, *step_ids: str) -> None:
    Step.objects.filter(run=run, step_id__in=step_ids).update(
        status=Step.Status.RUNNING, turns=0, turn_queued=timezone.now()
    )


def test_a_claim_takes_the_runs_waiting_first_turns_in_order_and_says_whether_more_wait(two_step_run):
    run = two_step_run
    _queue_first_turns(run, "s1", "s2")

    first, more = _claim(run)
    assert (first.step_id, first.lease_owner, first.turn_queued, more) == ("s1", "w1", None, True)
    assert first.run.pk == run.pk and first.unread == 0  # loaded for its turn
    second, more = _claim(run, "w2")
    assert (second.step_id, more) == ("s2", False)
    assert _claim(run) == (None, False)

    stored = {s.step_id: (s.lease_owner, s.turn_queued) for s in Step.objects.filter(run=run, kind="step")}
    assert stored == {"s1": ("w1", None), "s2": ("w2", None)}


def test_a_workers_next_claim_reads_on_past_the_step_it_claimed_last(two_step_run):
    run = two_step_run
    _queue_first_turns(run, "s1", "s2")
    s1 = run.steps.get(step_id="s1")

    step, more = _claim(run, after=s1.pk)
    assert (step.step_id, more) == ("s2", False)
    assert _claim(run, after=step.pk) == (None, False)
    assert _claim(run)[0].step_id == "s1"


def test_a_claim_leaves_turns_that_are_not_first_queued_or_free(two_step_run):
    run = two_step_run
    _queue_first_turns(run, "s1", "s2")
    # s1 is on its second turn (a tool task's result queued it); another worker leases s2.
    Step.objects.filter(run=run, step_id="s1").update(turns=1)
    Step.objects.filter(run=run, step_id="s2").update(
        lease_owner="elsewhere", lease_expires=timezone.now() + timedelta(seconds=60)
    )
    assert _claim(run) == (None, False)

    Step.objects.filter(run=run, step_id="s2").update(lease_expires=timezone.now() - timedelta(seconds=1))
    if connection.vendor == "postgresql":
        # A lease that ran out is taken once the server has been up a lease period (tests ran that long).
        Step.objects.filter(run=run, step_id="s2").update(lease_owner="", lease_expires=None)
    assert _claim(run)[0].step_id == "s2"


def test_a_claim_takes_nothing_from_a_run_that_stopped(two_step_run):
    run = two_step_run
    _queue_first_turns(run, "s1", "s2")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)

    assert _claim(run) == (None, False)
    assert Step.objects.filter(run=run, turn_queued__isnull=False).count() == 2


@pytest.mark.parametrize(("waiting", "expected"), [(12, (None, True)), (5, (None, False))])
def test_a_claim_on_sqlite_that_other_workers_keep_beating_gives_up_for_now(sqlite_run, monkeypatch, waiting, expected):
    # Between this worker's read and its claim, another worker claims the
    # turn it read, every time: it tries SQLITE_TRIES times, then leaves the
    # queue to the workers that won (they go on taking), without taking a
    # turn or spoiling one; with fewer waiting, it finds none left.
    run = sqlite_run
    for n in range(3, waiting + 1):
        Step.objects.create(run=run, step_id=f"s{n}", agent="worker", position=n, status=Step.Status.RUNNING)
    _queue_first_turns(run, *(f"s{n}" for n in range(1, waiting + 1)))
    claim = store().claim_step_for_turn

    def beaten(step_pk, *args):
        assert claim(step_pk, *args[:1], "rival", *args[2:]) is not None
        return claim(step_pk, *args)

    monkeypatch.setattr(store(), "claim_step_for_turn", beaten)

    assert _claim(run) == expected
    taken = Step.objects.filter(run=run, kind="step", turn_queued__isnull=True)
    assert set(taken.values_list("lease_owner", flat=True)) == {"rival"}
    assert taken.count() == min(waiting, queued_turns.SQLITE_TRIES)
    left = Step.objects.filter(run=run, kind="step", turn_queued__isnull=False)
    assert left.count() == waiting - taken.count() and not left.exclude(lease_owner="").exists()


@pytest.mark.services
def test_a_claim_skips_the_turn_another_claim_holds_instead_of_waiting_on_postgresql(pg_run):
    run = pg_run
    _queue_first_turns(run, "s1", "s2")
    holding, release = threading.Event(), threading.Event()
    held: list = []

    def hold_first_claim():
        try:
            with transaction.atomic():
                held.append(_claim(run, "w1")[0].step_id)
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_first_claim)
    holder.start()
    try:
        assert holding.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")  # waiting for s1's row would fail this claim
        step, more = _claim(run, "w2")
    finally:
        release.set()
        holder.join(10)

    assert held == ["s1"]
    assert step.step_id == "s2"


@pytest.mark.services
def test_the_claim_is_planned_once_and_reused_on_postgresql(pg_run):
    # With the step's status passed as a parameter, the generic plan could
    # not use the step_running index (partial, on that status), and
    # PostgreSQL planned the claim anew on every call: twice its cost.
    run = pg_run
    # Other runs' steps, as a database in use holds them, and statistics on them.
    others = Run.objects.create(workflow=run.workflow, status=Run.Status.COMPLETED)
    Step.objects.bulk_create(
        Step(run=others, step_id=f"done-{n}", agent="worker", status=Step.Status.COMPLETED) for n in range(5000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_step")
    for _ in range(12):
        _queue_first_turns(run, "s1", "s2")
        assert _claim(run)[0] is not None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH claimed AS%'"
        )
        [(generic, custom)] = cursor.fetchall()

    assert generic > custom, (generic, custom)


def test_a_fan_out_takes_every_first_turn_once_with_a_task_per_worker_that_joined(celery_worker, owner):
    workflow = register_text(wide(40))
    ran: Counter[str] = Counter()

    def count(sender=None, **kwargs):
        ran[sender.name] += 1

    task_prerun.connect(count, weak=False)
    try:
        run = wait_for_run(do_create_run(workflow, {}, user=owner), timeout=60)
    finally:
        task_prerun.disconnect(count)
    steps = list(run.steps.filter(kind="step"))
    took = [s.step_id for s in steps if s.turns == 1]

    assert run.status == Run.Status.COMPLETED
    assert len(steps) == 40 and len(took) == 40
    assert all(s.output.startswith("done item-") for s in steps)
    assert run.events.filter(type="agent_turn").exclude(step_id="coordinator").count() == 40
    # No step's first turn was a task of its own: a task per worker thread
    # that joined (four), and one that found nothing left, not one per step.
    assert ran["runs.tasks.run_step_turn"] == 0
    assert 2 <= ran["runs.tasks.take_queued_turns"] <= 6


def test_a_worker_hands_the_turns_left_to_a_task_of_its_own_past_its_time(celery_worker, owner, monkeypatch):
    # A warm shutdown waits for the task a worker is on: each task takes a
    # turn past its time (none here), then queues the one that goes on.
    monkeypatch.setattr(tasks, "TAKE_TURNS_FOR", 0.0)
    ran: Counter[str] = Counter()

    def count(sender=None, **kwargs):
        ran[sender.name] += 1

    task_prerun.connect(count, weak=False)
    try:
        run = wait_for_run(do_create_run(register_text(wide(12)), {}, user=owner), timeout=60)
    finally:
        task_prerun.disconnect(count)

    assert run.status == Run.Status.COMPLETED
    assert not run.steps.filter(kind="step").exclude(turns=1).exists()
    # A task per turn, at least, and no turn a task of its own.
    assert ran["runs.tasks.take_queued_turns"] >= 12
    assert ran["runs.tasks.run_step_turn"] == 0


def register_text(text: str):
    workflow, _ = do_register_workflow(text, "tests/integration/test_queued_turns.py")
    return workflow
