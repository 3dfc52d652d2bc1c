"""Resume: a running run whose queued work was lost gets going again."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.actions.recovery import do_resume_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def lost_run(owner) -> Run:
    """A run as a dead worker leaves it: running, its step's turn never taken."""
    workflow = register("relay")
    run = Run.objects.create(
        workflow=workflow, inputs={"subject": "tea"}, created_by=owner, status="running", started=timezone.now()
    )
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    Step.objects.create(run=run, step_id="first", agent="sender", status="running", position=1, started=timezone.now())
    Step.objects.create(run=run, step_id="second", agent="receiver", position=2, depends_on=["first"])
    return run


def test_it_resumes_a_run_whose_turn_was_lost(celery_worker, client, owner):
    run = lost_run(owner)
    client.force_login(owner)

    client.post(f"/runs/{run.pk}/resume/")

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert run.events.filter(type="run_resumed", data__steps=["first"]).exists()


def test_it_leaves_a_finished_run_alone(celery_worker, owner):
    run = lost_run(owner)
    Run.objects.filter(pk=run.pk).update(status="completed")

    assert do_resume_run(run.pk, "test") == []
    assert not run.events.exists()


def test_it_refuses_to_resume_someone_elses_run(celery_worker, client, owner, teammate):
    run = lost_run(owner)
    client.force_login(teammate)

    assert client.post(f"/runs/{run.pk}/resume/").status_code == 404
