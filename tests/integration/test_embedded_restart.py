"""Embedded zenweb restarted: the runs that were live when it stopped (their
queued tasks were in its memory broker, their leases its old process's) go
on within seconds of `serve` starting again, not after the leases run out."""

from __future__ import annotations

import time
from datetime import timedelta
from io import StringIO

import pytest
from django.utils import timezone

from runs import queue, tasks
from runs.actions import do_create_run, do_start_run
from runs.models import Run, Step
from tests.conftest import assert_gapless, register, wait_for_run
from zenweb import embedded

pytestmark = pytest.mark.django_db(transaction=True)


def test_runs_live_when_zenweb_stopped_go_on_soon_after_it_starts(celery_worker, owner, monkeypatch):
    # What the stopped process left: a pending run and a running one whose
    # queued tasks went with its memory broker, and a lease it still held.
    with monkeypatch.context() as lost:
        lost.setattr(tasks.start_run, "delay", lambda *args: None)
        lost.setattr(queue, "queue_after_commit", lambda *args: None)
        pending = do_create_run(register("relay"), {"subject": "tides"}, user=owner)
        running = do_create_run(register("relay"), {"subject": "moons"}, user=owner)
        do_start_run(running.pk)
    step = Step.objects.filter(run=running, kind=Step.Kind.STEP, status=Step.Status.RUNNING).first()
    Step.objects.filter(pk=step.pk).update(
        lease_owner="old-host:1:MainThread", lease_expires=timezone.now() + timedelta(seconds=60)
    )
    assert Run.objects.get(pk=pending.pk).status == Run.Status.PENDING

    out = StringIO()
    started = time.monotonic()
    embedded.resume_interrupted_runs(out)
    runs = [wait_for_run(pending, timeout=20), wait_for_run(running, timeout=20)]

    assert time.monotonic() - started < 20  # the old lease (60 s) was not waited for
    assert out.getvalue().strip() == "resumed 2 run(s) that were live when zenweb last stopped"
    for run in runs:
        assert run.status == Run.Status.COMPLETED, run.error
        assert_gapless(run)
    assert runs[1].events.filter(type="run_resumed", data__reason="zenweb restarted").count() == 1
