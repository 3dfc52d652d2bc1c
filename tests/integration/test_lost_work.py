"""No lost work: a task whose publish failed (the broker away) is kept and
sent again by the sweeper once the broker answers, and a run that did not
start says why, on its page and in the API. (tests/services stops a real
Redis for the same.)"""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from runs import tasks
from runs.actions import do_create_run
from runs.actions.approvals import do_decide
from runs.models import Approval, Run, Step, ToolCall, UnsentTask
from runs.sweeper import do_sweep
from tests.conftest import register, wait_for, wait_for_run
from tests.services.throwaway_redis import broker_at

pytestmark = pytest.mark.django_db(transaction=True)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def broker_away():
    """Publishes go to a Redis that is not there (the worker keeps consuming the memory broker)."""
    return broker_at(f"redis://127.0.0.1:{closed_port()}/0")


def test_a_run_whose_start_could_not_be_queued_starts_once_the_broker_is_back(celery_worker, owner, settings):
    settings.ZENWEB_REQUEUE_AFTER = 5
    with broker_away():
        run = do_create_run(register("relay"), {"subject": "tides"}, user=owner)
        unsent = UnsentTask.objects.get()
        assert (unsent.name, unsent.args) == ("runs.tasks.start_run", [run.pk])

        # Past its deadline, the sweeper says why it has not started; the broker is still away.
        Run.objects.filter(pk=run.pk).update(created=timezone.now() - timedelta(seconds=10))
        do_sweep()
        run.refresh_from_db()
        assert run.status == Run.Status.PENDING
        assert run.stuck_reason.startswith("not started: its start could not be queued (OperationalError")
        client = Client()
        client.force_login(owner)
        assert client.get(f"/api/runs/{run.pk}").json()["stuck"] == run.stuck_reason
        assert "not started: its start could not be queued" in client.get(f"/runs/{run.pk}/").content.decode()
        assert UnsentTask.objects.count() == 1

    assert do_sweep()["sent_again"] == 1
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.stuck_reason == ""
    assert not UnsentTask.objects.exists()


def test_a_pending_run_whose_start_task_was_lost_is_started_again(celery_worker, owner, settings):
    settings.ZENWEB_REQUEUE_AFTER = 5
    # A pending run whose start task the broker lost (a Redis restart without persistence).
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "tides"}, created_by=owner)
    Run.objects.filter(pk=run.pk).update(created=timezone.now() - timedelta(seconds=10))

    assert do_sweep()["starts_requeued"] == 1
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.stuck_reason == ""
    assert run.events.filter(type="workflow_start").count() == 1
    # Once per deadline: a sweep right after queues nothing more.
    assert do_sweep()["starts_requeued"] == 0


def test_a_coordinator_wake_whose_task_was_lost_is_queued_again(celery_worker, owner, settings, monkeypatch):
    settings.ZENWEB_REQUEUE_AFTER = 5
    with monkeypatch.context() as lost:
        # The wake the finished step asks for is queued, then lost with the broker.
        lost.setattr(tasks.wake_coordinator, "delay", lambda *args: None)
        # Or the worker that would wake it itself (eager continuation) dies first.
        lost.setattr(tasks, "_wake_here", lambda run_id: None)
        run = do_create_run(register("tools/appender_tasks"), {}, user=owner)
        wait_for(lambda: Run.objects.filter(pk=run.pk, wake_queued__isnull=False, coordinator_busy=False).exists())
        time.sleep(0.5)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    Run.objects.filter(pk=run.pk).update(wake_queued=timezone.now() - timedelta(seconds=10))

    assert do_sweep()["wakes_requeued"] == 1
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.events.order_by("-seq").values_list("type", flat=True)[0] == "workflow_end"


def lose_turn(monkeypatch, turn: int) -> list[int]:
    """The first task of a turn number ``turn`` is published, then lost (the
    broker dropped it); the list gets the pk of its step."""
    publish = tasks.run_step_turn.apply_async
    lost: list[int] = []

    def apply_async(args=None, kwargs=None, *rest, **options):
        if not lost and args[1] == turn:
            lost.append(args[0])
            return None
        return publish(args, kwargs, *rest, **options)

    monkeypatch.setattr(tasks.run_step_turn, "apply_async", apply_async)
    return lost


def test_a_step_turn_whose_task_was_lost_is_queued_again(celery_worker, owner, settings, monkeypatch):
    settings.ZENWEB_REQUEUE_AFTER = 5
    lost = lose_turn(monkeypatch, 2)
    run = do_create_run(register("tools/appender_tasks"), {}, user=owner)
    step = Step.objects.get(pk=wait_for(lambda: lost)[0])
    time.sleep(0.5)
    step.refresh_from_db()
    assert (step.status, step.turns) == (Step.Status.RUNNING, 1)
    # Within its deadline it is left alone: the task may only be slow.
    assert do_sweep()["turns_requeued"] == 0

    sweep_past_the_deadline(run, Step.objects.filter(pk=step.pk), requeued=1)


def test_first_turns_whose_queue_task_was_lost_are_queued_again_each(celery_worker, owner, settings, monkeypatch):
    # A start that starts two steps leaves their first turns queued for
    # take_queued_turns; the broker drops that task.
    settings.ZENWEB_REQUEUE_AFTER = 5
    lost: list[tuple] = []
    monkeypatch.setattr(tasks.take_queued_turns, "apply_async", lambda args=None, *rest, **options: lost.append(args))
    run = do_create_run(register("tools/appender_beside"), {}, user=owner)
    assert wait_for(lambda: lost) == [(run.pk,)]
    time.sleep(0.5)
    steps = run.steps.filter(status=Step.Status.RUNNING, turns=0, turn_queued__isnull=False)
    assert steps.count() == 2
    assert do_sweep()["turns_requeued"] == 0

    sweep_past_the_deadline(run, steps, requeued=2)


def sweep_past_the_deadline(run: Run, steps, requeued: int) -> None:
    """Once ``steps``' queued turns are past their deadline, the sweeper
    queues each again, once; the run then completes with its command run once."""
    steps.update(turn_queued=timezone.now() - timedelta(seconds=10))
    assert do_sweep()["turns_requeued"] == requeued
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="append").output == "appended"
    assert ToolCall.objects.filter(run=run, name="run_shell").count() == 1
    assert do_sweep()["turns_requeued"] == 0


def test_a_step_waiting_for_a_person_is_not_given_a_turn_by_the_sweeper(celery_worker, owner, approver, settings):
    settings.ZENWEB_REQUEUE_AFTER = 5
    run = do_create_run(register("approvals/gated"), {}, user=owner)
    approval = wait_for(lambda: Approval.objects.filter(run=run, status="pending").first())
    wait_for(lambda: run.steps.filter(step_id="other", status=Step.Status.COMPLETED).exists())
    time.sleep(0.5)
    build = run.steps.get(step_id="build")
    assert (build.status, build.turns) == (Step.Status.RUNNING, 1)

    # An hour later, the person has still not decided.
    later = timezone.now() + timedelta(hours=1)
    with mock.patch("django.utils.timezone.now", return_value=later):
        assert do_sweep()["turns_requeued"] == 0
    time.sleep(0.5)
    build.refresh_from_db()
    assert build.turns == 1
    assert Approval.objects.get(pk=approval.pk).status == "pending"

    do_decide(approval.pk, approver, "approve", "a build is fine")
    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert run.steps.get(step_id="build").output == "built"
