"""No lost work: a task whose publish failed (the broker away) is kept and
sent again by the sweeper once the broker answers, and a run that did not
start says why, on its page and in the API. (tests/services stops a real
Redis for the same.)"""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from runs import tasks
from runs.actions import do_create_run
from runs.leases import do_sweep
from runs.models import Run, UnsentTask
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
        run = do_create_run(register("tools/appender_tasks"), {}, user=owner)
        wait_for(lambda: Run.objects.filter(pk=run.pk, wake_queued__isnull=False, coordinator_busy=False).exists())
        time.sleep(0.5)
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    Run.objects.filter(pk=run.pk).update(wake_queued=timezone.now() - timedelta(seconds=10))

    assert do_sweep()["wakes_requeued"] == 1
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED
    assert run.events.order_by("-seq").values_list("type", flat=True)[0] == "workflow_end"
