"""Commands over the JSON API: asking which workflow, answering in markdown,
and starting a run whose result the command reports."""

from __future__ import annotations

import pytest

from runs.actions import TooManyRuns, do_cancel_run, do_register_workflow
from runs.actions.commands import do_command
from runs.models import Command, Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db


def test_it_asks_which_workflow_when_a_command_names_none(owner):
    do_register_workflow(ECHO, "echo.yaml")
    register("relay")
    client = api(owner)

    response = post(client, "/api/commands", {"command": "tell me a joke"})

    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["run"]) == ("needs_clarification", None)
    assert body["result"]["_type"] == "COORDINATOR_RESULT"
    assert {o["would_select"] for o in body["result"]["clarification_options"]} == {"echo", "relay"}
    assert client.get(f"/api/commands/{body['id']}").json() == body
    assert not Run.objects.exists()


def test_it_answers_a_command_in_markdown(owner, teammate):
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)
    post(client, "/api/commands", {"command": "tell me a joke"})

    second = post(client, "/api/commands?format=markdown", {"command": "sing a song"})
    by_header = post(client, "/api/commands", {"command": "draw a map"}, headers={"Accept": "text/markdown"})

    assert second.status_code == 201
    assert second["Content-Type"] == "text/markdown; charset=utf-8"
    lines = second.content.decode().splitlines()
    assert lines[:4] == [
        "### Executor Iteration 2",
        "**Action:** COMMAND",
        '**Command:** "sing a song"',
        "**Coordinator:** no workflow selected",
    ]
    assert lines[4].startswith("**Result:** NEEDS_CLARIFICATION - ")
    assert by_header.content.decode().startswith("### Executor Iteration 3\n")
    # Iterations count each user's own commands.
    assert post(api(teammate), "/api/commands?format=markdown", {"command": "hi"}).content.startswith(
        b"### Executor Iteration 1\n"
    )


@pytest.mark.django_db(transaction=True)
def test_it_starts_a_run_from_a_command_and_reports_its_result(celery_worker, owner):
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)

    response = post(client, "/api/commands", {"command": "echo for tides"})

    assert response.status_code in (201, 202)  # final already, or still running
    body = response.json()
    assert body["result"]["workflow_selected"] == "echo"
    assert body["result"]["workflow_args"] == {"subject": "tides", "mode": "chat", "original_query": "echo for tides"}
    assert body["result"]["selection_reason"] == "name given: the command names echo"
    run = Run.objects.get(pk=body["run"]["id"])
    assert body["run"]["url"] == f"http://testserver/runs/{run.pk}/"
    assert (run.created_by, run.command) == (owner, "echo for tides")

    wait_for_run(run)
    later = client.get(f"/api/commands/{body['id']}").json()
    assert later["status"] == "success"
    assert later["run"]["status"] == "completed"
    assert "echo: tides" in later["result"]["result"]["summary"]


def test_it_refuses_a_command_while_the_caller_has_as_many_runs_under_way_as_allowed(
    owner, teammate, settings, django_capture_on_commit_callbacks
):
    # A client looping on POST /api/commands: each command would ask the
    # model and queue a run. No worker runs here: the runs stay pending.
    settings.ZENWEB_MAX_ACTIVE_RUNS = 2
    do_register_workflow(ECHO, "echo.yaml")
    client = api(owner)
    with django_capture_on_commit_callbacks(execute=False):
        started = [post(client, "/api/commands", {"command": f"echo for {n}"}) for n in range(2)]
        refused = post(client, "/api/commands", {"command": "echo for more"})
        with pytest.raises(TooManyRuns) as form:
            do_command("echo for more", user=owner)

    assert [r.status_code for r in started] == [202, 202]
    limit = "you have 2 runs under way (pending, running or waiting for approval) and at most 2 may be"
    assert (refused.status_code, refused.json()["error"].startswith(limit)) == (429, True)
    assert refused["Retry-After"] == "30"
    assert str(form.value).startswith(limit)
    assert Run.objects.count() == 2 and Command.objects.filter(created_by=owner).count() == 2
    assert post(api(teammate), "/api/commands", {"command": "echo for me"}).status_code == 202  # someone else's count

    do_cancel_run(Run.objects.filter(created_by=owner).first().pk)
    assert post(client, "/api/commands", {"command": "echo for one more"}).status_code == 202


def test_the_run_form_is_refused_too_when_its_person_has_as_many_runs_under_way_as_allowed(
    client, owner, settings, django_capture_on_commit_callbacks
):
    # The dashboard's start form goes through do_create_run, not a command.
    settings.ZENWEB_MAX_ACTIVE_RUNS = 1
    workflow = do_register_workflow(ECHO, "echo.yaml")[0]
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=False):
        first = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "subject=one"})
        second = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "subject=two"}, follow=True)

    assert first.status_code == 302 and Run.objects.filter(workflow=workflow).count() == 1
    assert (second.status_code, second["Retry-After"]) == (429, "30")
    assert "you have 1 runs under way" in second.content.decode()
    # The command box is refused alike, before the model is asked.
    boxed = client.post("/commands/", {"command": "echo for three"})
    assert (boxed.status_code, boxed["Retry-After"]) == (429, "30")
    assert "you have 1 runs under way" in boxed.content.decode()
    assert Run.objects.count() == 1
