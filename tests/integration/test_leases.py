"""Leases: one worker per turn, and a turn whose worker died is handed on;
runs that stop moving are marked stuck."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from runs import leases, sweeper
from runs.models import Event, Run, Step
from runs.store.sql import store
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def orphaned_run(owner, *, lease_owner: str = "dead-host:1:worker", expires_in: float = -1) -> Run:
    """A run whose first step's turn was claimed by a worker that then died."""
    run = Run.objects.create(
        workflow=register("relay"),
        inputs={"subject": "tea"},
        created_by=owner,
        status="running",
        started=timezone.now(),
    )
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    Step.objects.create(
        run=run,
        step_id="first",
        agent="sender",
        status="running",
        position=1,
        lease_owner=lease_owner,
        lease_expires=timezone.now() + timedelta(seconds=expires_in),
    )
    Step.objects.create(run=run, step_id="second", agent="receiver", position=2, depends_on=["first"])
    return run


def test_it_gives_a_turn_to_one_worker_at_a_time(owner):
    run = orphaned_run(owner, lease_owner="alive:1:w", expires_in=60)
    step = run.steps.get(step_id="first")

    assert leases.claim(step.pk, 1, "other:2:w") is False
    assert leases.claim(step.pk, 1, "alive:1:w") is True


def test_it_lets_another_worker_take_an_expired_turn(owner):
    run = orphaned_run(owner)
    step = run.steps.get(step_id="first")

    assert leases.claim(step.pk, 1, "other:2:w") is True
    step.refresh_from_db()
    assert step.lease_owner == "other:2:w" and step.lease_expires > timezone.now()


def test_it_hands_the_turn_of_a_dead_worker_to_a_live_one(celery_worker, owner):
    run = orphaned_run(owner)

    assert sweeper.do_sweep()["expired"] == 1

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    expired = run.events.get(type="lease_expired")
    assert (expired.step_id, expired.data) == ("first", {"owner": "dead-host:1:worker", "turn": 1})
    assert run.steps.get(step_id="first").lease_owner == ""


def test_it_leaves_a_live_lease_alone(owner):
    run = orphaned_run(owner, lease_owner="alive:1:w", expires_in=60)

    assert sweeper.do_sweep()["expired"] == 0
    assert run.steps.get(step_id="first").lease_owner == "alive:1:w"


def test_it_marks_a_run_that_stopped_moving_and_shows_it(owner, client, settings):
    run = orphaned_run(owner, lease_owner="alive:1:w", expires_in=600)
    Event.objects.create(run=run, seq=1, type="workflow_start", data={})
    Run.objects.filter(pk=run.pk).update(last_event_seq=1)
    Event.objects.filter(run=run).update(created=timezone.now() - timedelta(hours=2))
    settings.ZENWEB_STUCK_AFTER = 60

    assert sweeper.do_sweep()["stuck"] == 1
    assert sweeper.do_sweep()["stuck"] == 0

    run.refresh_from_db()
    assert run.stuck_reason.startswith("no progress since")
    assert run.events.filter(type="run_stuck").count() == 1
    client.force_login(owner)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    # The worker's id may break after its separators (<wbr>); the text reads whole.
    assert 'id="run-stuck"' in html and 'on <span class="worker-id">alive:1:w</span>' in html.replace("<wbr>", "")


def test_it_resumes_a_silent_run_whose_queued_work_was_lost(celery_worker, owner, settings):
    # A turn that was queued, never claimed, and lost with the broker's memory.
    run = orphaned_run(owner, lease_owner="", expires_in=0)
    Step.objects.filter(run=run, step_id="first").update(lease_expires=None)
    Event.objects.create(run=run, seq=1, type="workflow_start", data={})
    Run.objects.filter(pk=run.pk).update(last_event_seq=1)
    Event.objects.filter(run=run).update(created=timezone.now() - timedelta(minutes=5))
    settings.ZENWEB_RESUME_AFTER = 60

    assert sweeper.do_sweep()["resumed"] == 1
    assert sweeper.do_sweep()["resumed"] == 0  # once per silence

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert run.events.get(type="run_resumed").data["reason"] == "no progress for 60s"


def test_it_keeps_renewing_the_lease_of_a_turn_that_outlasts_it(owner, settings):
    # A model (or tool) that thinks for longer than a lease: the worker's
    # renewals keep the turn, so the sweeper does not hand it to another.
    settings.ZENWEB_LEASE_SECONDS = 1.0  # renewed every third of it
    run = orphaned_run(owner)
    step = run.steps.get(step_id="first")
    assert leases.claim(step.pk, 1, "alive:1:w") is True

    with leases.renewing(step.pk, "alive:1:w"):
        for _ in range(4):  # two leases' worth
            time.sleep(0.5)
            assert sweeper.do_sweep()["expired"] == 0
            step.refresh_from_db()
            assert step.lease_owner == "alive:1:w"
            assert step.lease_expires > timezone.now()

    # Once the turn is over nothing renews it: it lapses and can be taken.
    time.sleep(1.3)
    assert leases.claim(step.pk, 1, "other:2:w") is True


@pytest.mark.services
def test_no_lease_lapses_within_a_lease_period_of_the_databases_start_on_postgresql(pg_run, settings):
    # After a crash of the database no worker could renew its leases while
    # it was down: they get one lease period from its start to renew them
    # (tests/services/test_postgres_crash.py shows it end to end).
    settings.ZENWEB_LEASE_SECONDS = 60
    up_for = store().database_up_for()

    assert up_for is not None and up_for > 0
    assert not sweeper.leases_lapse(59.0)
    assert sweeper.leases_lapse(60.0)


def test_leases_lapse_at_once_without_a_database_server():
    assert sweeper.leases_lapse(None)  # SQLite: a file of this process, never away


@pytest.mark.services
def test_a_sweeper_that_lost_the_database_leaves_live_workers_a_lease_period_to_renew(
    pg_run, settings, monkeypatch, recorded_tasks
):
    # The server's recovery after a crash can outlast a lease: its uptime
    # has passed a lease period when it first answers, and the worker that
    # lived through the outage has not renewed yet. The sweeper counts from
    # when it reached the database again, as from its own start.
    settings.ZENWEB_LEASE_SECONDS = 1.0
    lapsed = timezone.now() - timedelta(seconds=5)

    def held_by_a_survivor() -> None:
        Step.objects.filter(run=pg_run, step_id="s1").update(lease_owner="survivor", lease_expires=lapsed, turns=1)

    def expired() -> bool:
        return not Step.objects.filter(run=pg_run, step_id="s1", lease_owner="survivor").exists()

    held_by_a_survivor()
    sweeps = sweeper.Sweeper()  # not started: each sweep is called here
    sweeps.sweep()
    assert not expired()  # within a lease period of its start
    time.sleep(1.1)
    sweeps.sweep()
    assert expired()

    held_by_a_survivor()

    def away():
        raise OperationalError("connection failed: the database system is starting up")

    monkeypatch.setattr(store(), "database_up_for", away)
    sweeps.sweep()  # logged, not raised
    monkeypatch.delattr(store(), "database_up_for")
    sweeps.sweep()
    assert not expired()  # the server is long up, but this sweeper just reached it again
    time.sleep(1.1)
    sweeps.sweep()
    assert expired()
    assert Event.objects.filter(run=pg_run, type="lease_expired").count() == 2


def test_a_sweep_that_cannot_reach_the_database_logs_one_line_and_a_broken_one_its_traceback(monkeypatch, caplog):
    # A worker whose database is away sweeps every few seconds: a traceback
    # each time buried what else its log said (865 lines in 25 s).
    sweeps = sweeper.Sweeper()  # not started: each sweep is called here
    monkeypatch.setattr(sweeper, "close_old_connections", lambda: None)

    def unreachable(reached_for):
        raise OperationalError(
            'connection to server at "db" (10.0.0.5), port 5432 failed: Connection refused\nIs it up?'
        )

    monkeypatch.setattr(sweeper, "do_sweep", unreachable)
    with caplog.at_level(logging.WARNING, logger="runs.sweeper"):
        sweeps.sweep()
    monkeypatch.setattr(sweeper, "do_sweep", lambda reached_for: 1 / 0)
    with caplog.at_level(logging.WARNING, logger="runs.sweeper"):
        sweeps.sweep()

    lost, broken = caplog.records
    assert (lost.levelname, lost.exc_info) == ("WARNING", None)
    assert lost.getMessage() == (
        'lease sweep: the database cannot be reached (connection to server at "db" (10.0.0.5), port 5432 failed: '
        "Connection refused); sweeping again"
    )
    assert (broken.levelname, broken.getMessage(), broken.exc_info[0]) == (
        "ERROR",
        "lease sweep failed",
        ZeroDivisionError,
    )
