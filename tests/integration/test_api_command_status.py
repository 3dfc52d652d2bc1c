"""A command's status over the JSON API is the truth: `running` (202, with the
command's URL) while its run is under way, and `success`, `error` or
`blocked` only from how the run ended; `?wait=N` holds the answer until then."""

from __future__ import annotations

import pytest

from runs.actions import do_register_workflow
from runs.models import Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db

BROKEN = """\
name: broken
description: A step whose model endpoint fails.
triggers: [broken]
inputs:
  subject: {type: string, required: true}
agents:
  flaky:
    description: flaky agent
    script:
      - fail: "model endpoint said: 503 upstream overloaded"
steps:
  - id: fetch
    agent: flaky
"""


def test_a_command_whose_run_has_not_ended_is_running_with_its_url(owner, django_capture_on_commit_callbacks):
    # No worker: the run stays pending.
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)
    with django_capture_on_commit_callbacks(execute=False):
        response = post(client, "/api/commands", {"command": "echo for tides"})

    assert response.status_code == 202
    body = response.json()
    url = f"http://testserver/api/commands/{body['id']}"
    assert (body["status"], body["result"]["status"], body["result"]["result"]) == ("running", "running", None)
    assert (body["url"], response["Location"]) == (url, url)
    assert body["run"]["status"] == "pending"
    later = client.get(f"/api/commands/{body['id']}")
    assert (later.status_code, later.json()["status"]) == (200, "running")
    markdown = client.get(f"/api/commands/{body['id']}?format=markdown").content.decode()
    assert "**Result:** RUNNING - " in markdown


def test_wait_is_bounded_and_a_running_command_answers_when_it_passes(owner, django_capture_on_commit_callbacks):
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)
    with django_capture_on_commit_callbacks(execute=False):
        body = post(client, "/api/commands?wait=1", {"command": "echo for tides"}).json()

    assert body["status"] == "running"
    too_long = client.get(f"/api/commands/{body['id']}?wait=61")
    assert too_long.status_code == 400
    assert "wait" in too_long.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_get_at_once_after_the_post_never_says_success_before_the_run_completed(celery_worker, owner):
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)

    response = post(client, "/api/commands", {"command": "echo for tides"})
    body = response.json()
    seen = [(response.status_code, body["status"], body["run"]["status"])]
    run = Run.objects.get(pk=body["run"]["id"])
    while not run.is_terminal:
        later = client.get(f"/api/commands/{body['id']}").json()
        seen.append((200, later["status"], later["run"]["status"]))
        run.refresh_from_db()

    for _, status, run_status in seen:
        assert status == "running" or run_status == "completed", seen
    assert seen[0][0] == (201 if seen[0][1] == "success" else 202)
    final = client.get(f"/api/commands/{body['id']}?wait=30").json()
    assert (final["status"], final["run"]["status"]) == ("success", "completed")
    assert "echo: tides" in final["result"]["result"]["summary"]


@pytest.mark.django_db(transaction=True)
def test_wait_holds_the_post_until_the_run_ends(celery_worker, owner):
    do_register_workflow(ECHO, "echo.yaml")

    response = post(api(owner), "/api/commands?wait=30", {"command": "echo for tides"})

    assert response.status_code == 201
    assert "Location" not in response
    body = response.json()
    assert (body["status"], body["run"]["status"]) == ("success", "completed")


@pytest.mark.django_db(transaction=True)
def test_a_failed_runs_command_is_an_error_with_the_runs_reason(celery_worker, owner):
    do_register_workflow(BROKEN, "broken.yaml")
    client = api(owner)

    body = post(client, "/api/commands", {"command": "broken for tides"}).json()
    wait_for_run(Run.objects.get(pk=body["run"]["id"]))
    final = client.get(f"/api/commands/{body['id']}").json()

    assert (final["status"], final["run"]["status"]) == ("error", "failed")
    assert "503 upstream overloaded" in final["result"]["error"]


@pytest.mark.django_db(transaction=True)
def test_a_run_missing_sources_makes_its_command_blocked_once_it_ends(celery_worker, owner):
    register("commands/sourceless")
    client = api(owner)

    body = post(client, "/api/commands?wait=30", {"command": "rumour for laptops"}).json()

    assert (body["status"], body["run"]["status"]) == ("blocked", "completed")
    assert body["result"]["requires_retry"] is True


def test_a_destructive_command_is_blocked_until_a_person_decides(owner, django_capture_on_commit_callbacks):
    register("approvals/wipe")
    with django_capture_on_commit_callbacks(execute=False):
        response = post(api(owner), "/api/commands?wait=5", {"command": "wipe the build folder"})

    # Nothing moves until someone decides: the answer comes at once, and says so.
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["result"]["requires_approval"]) == ("blocked", True)
    assert body["run"]["status"] == "awaiting_approval"
