"""Cancelling a run from the JSON API and from the terminal."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from runs import actions
from runs.models import Run
from tests.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(django_capture_on_commit_callbacks, owner):
    with django_capture_on_commit_callbacks(execute=False):
        run = actions.do_create_run(register("relay"), {"subject": "x"}, user=owner)
    with django_capture_on_commit_callbacks(execute=False):
        actions.do_start_run(run.pk)
    return run


def test_it_cancels_a_run_through_the_api(client, owner, running):
    client.force_login(owner)

    response = client.post(f"/api/runs/{running.pk}/cancel")

    assert response.status_code == 200
    assert response.json() == {"id": running.pk, "status": "cancelled", "cancelled": True}
    running.refresh_from_db()
    assert running.status == Run.Status.CANCELLED
    assert running.error == "cancelled by owner"
    assert list(running.events.values_list("type", flat=True))[-1] == "workflow_end"


def test_it_answers_409_for_a_run_that_already_ended(client, owner, running):
    client.force_login(owner)
    client.post(f"/api/runs/{running.pk}/cancel")

    response = client.post(f"/api/runs/{running.pk}/cancel")

    assert response.status_code == 409
    assert response.json()["error"] == f"run {running.pk} already ended cancelled"


def test_it_hides_the_run_from_others(client, teammate, running):
    client.force_login(teammate)

    assert client.post(f"/api/runs/{running.pk}/cancel").status_code == 404
    running.refresh_from_db()
    assert running.status == Run.Status.RUNNING


def test_it_requires_a_csrf_token(owner, running):
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)

    assert client.post(f"/api/runs/{running.pk}/cancel").status_code == 403
    running.refresh_from_db()
    assert running.status == Run.Status.RUNNING


def test_it_cancels_a_run_from_the_command_line(running, capsys):
    call_command("cancel_run", str(running.pk), "--reason", "operator said so")

    running.refresh_from_db()
    assert (running.status, running.error) == (Run.Status.CANCELLED, "operator said so")
    assert capsys.readouterr().out.strip() == f"run {running.pk} cancelled"
    with pytest.raises(CommandError, match="already ended cancelled"):
        call_command("cancel_run", str(running.pk))
