"""When routing wakes the coordinator: once per committed transaction that
sent mail to an idle coordinator with no wake queued, never for a
rolled-back one, and not while a wake is running (that wake sees the new
mail before it goes idle) or queued (it reads the mail when it starts). A
queued wake that finds another running, a publish that fails, and a mark
older than a lease (a task the broker lost) hold nothing back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agents.router import COORDINATOR
from runs import tasks
from runs.actions.common import router_for
from runs.actions.coordinator import do_coordinator_wake
from runs.models import Run, Step
from runs.store.sql import store
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(vendor):
    """Once per database (``vendor``): the SQL that counts a wake request and
    marks a queued wake differs (one statement with the message on PostgreSQL)."""
    run = Run.objects.create(workflow=register("relay"), status=Run.Status.RUNNING, started=timezone.now())
    Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
    Step.objects.create(run=run, step_id="first", agent="sender", status=Step.Status.RUNNING)
    return run


@pytest.fixture
def wakes(monkeypatch):
    """The wake tasks published to the broker (run ids), instead of publishing them."""
    published: list[int] = []
    monkeypatch.setattr(tasks.wake_coordinator, "delay", published.append)
    return published


def send(run: Run, *texts: str) -> None:
    with transaction.atomic():
        store().lock_run(run.pk)
        router = router_for(run.pk)
        for text in texts:
            assert router.send("first", text).status == "queued"


def test_it_wakes_the_coordinator_once_for_a_transactions_messages(run, wakes):
    send(run, "one", "two", "three")
    assert wakes == [run.pk]
    assert Run.objects.get(pk=run.pk).wake_requests == 3


def test_it_queues_no_second_wake_until_the_first_starts(run, wakes):
    send(run, "one")
    send(run, "two")
    send(run, "three")
    assert wakes == [run.pk]  # the queued wake reads all three
    assert Run.objects.get(pk=run.pk).wake_requests == 3

    do_coordinator_wake(run.pk)  # the queued wake runs, and goes idle
    assert run.events.filter(type="coordinator_inbox_message").count() == 3
    send(run, "four")
    assert wakes == [run.pk, run.pk]


def test_a_queued_wake_that_finds_another_running_lets_the_next_send_queue_one(run, wakes):
    send(run, "one")
    Run.objects.filter(pk=run.pk).update(coordinator_busy=True)  # another wake runs
    do_coordinator_wake(run.pk)  # the queued one starts, and leaves
    Run.objects.filter(pk=run.pk).update(coordinator_busy=False)  # the other goes idle

    send(run, "two")
    assert wakes == [run.pk, run.pk]


def test_a_wake_queued_longer_than_a_lease_ago_holds_nothing_back(run, wakes, settings):
    send(run, "one")
    lost = timezone.now() - timedelta(seconds=settings.ZENWEB_LEASE_SECONDS + 1)
    Run.objects.filter(pk=run.pk).update(wake_queued=lost)  # its task never started

    send(run, "two")
    assert wakes == [run.pk, run.pk]


def test_a_wake_that_could_not_be_published_lets_the_next_send_queue_one(run, wakes, monkeypatch):
    def broker_down(run_id: int) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(tasks.wake_coordinator, "delay", broker_down)
    send(run, "one")  # the publish fails after commit (logged)
    assert Run.objects.get(pk=run.pk).wake_queued is None

    monkeypatch.setattr(tasks.wake_coordinator, "delay", wakes.append)
    send(run, "two")
    assert wakes == [run.pk]


def test_it_wakes_nobody_for_a_rolled_back_send_and_still_wakes_for_the_next(run, wakes):
    with pytest.raises(RuntimeError), transaction.atomic():
        store().lock_run(run.pk)
        router_for(run.pk).send("first", "never committed")
        raise RuntimeError("the turn failed")
    assert wakes == []

    send(run, "after the rollback")
    assert wakes == [run.pk]


def test_a_send_in_a_rolled_back_savepoint_leaves_the_wake_to_the_send_after_it(run, wakes):
    with transaction.atomic():
        store().lock_run(run.pk)
        router = router_for(run.pk)
        with pytest.raises(RuntimeError), transaction.atomic():
            router.send("first", "undone with its savepoint")
            raise RuntimeError("a tool failed")
        assert router.send("first", "kept").status == "queued"

    assert wakes == [run.pk]
    assert Run.objects.get(pk=run.pk).wake_requests == 1


def test_it_leaves_mail_for_a_busy_coordinator_to_the_wake_that_runs(run, wakes):
    Run.objects.filter(pk=run.pk).update(coordinator_busy=True)
    seen = Run.objects.get(pk=run.pk).wake_requests

    send(run, "while the coordinator works")

    assert wakes == []
    # The running wake read wake_requests before its inbox: it may not go idle.
    assert not Run.objects.filter(pk=run.pk, wake_requests=seen).update(coordinator_busy=False)
    Run.objects.filter(pk=run.pk).update(coordinator_busy=False)
    do_coordinator_wake(run.pk)
    assert run.events.filter(type="coordinator_inbox_message").count() == 1


def test_it_names_a_field_that_the_raw_message_insert_would_leave_empty():
    from runs.models import Message
    from runs.store.sql.rows import row_values

    # Every other field has a default or is nullable; "created" has neither.
    with pytest.raises(TypeError, match="writes Message rows itself: give it a 'created'"):
        row_values(Message, {"run": 1, "message_id": "msg-send-1", "sender": "a", "recipient": "b", "type": "info"})
