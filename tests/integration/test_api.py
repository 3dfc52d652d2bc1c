"""The JSON API, over HTTP: token and session auth, commands, runs, approvals,
workflows, and the OpenAPI document that describes them."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from runs.actions import do_create_run, do_register_workflow, do_start_run
from runs.models import ApiToken, Approval, Event, Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db

# A fast workflow the scripted workflow handler selects for "echo ... for <subject>".
ECHO = """\
name: echo
description: Say the subject back.
triggers: [echo]
inputs:
  subject:
    type: string
    required: true
agents:
  echoer:
    script:
      - say: "echo: $subject"
steps:
  - id: echo
    agent: echoer
"""

BROKEN = """\
name: broken
agents:
  a: {system: hi}
steps:
  - id: one
    agent: ghost
  - id: two
    agent: a
    colour: blue
"""


def token_for(user, name: str = "") -> str:
    """A key made the way an operator makes one, with the management command."""
    stdout, stderr = StringIO(), StringIO()
    call_command("create_api_token", user.username, "--name", name, stdout=stdout, stderr=stderr)
    assert "it is not shown again" in stderr.getvalue()
    return stdout.getvalue().strip()


def api(user) -> Client:
    """A client that sends the user's token on every request (and no cookie)."""
    return Client(headers={"Authorization": f"Token {token_for(user)}"})


def post(client: Client, url: str, body: object, **extra):
    return client.post(url, json.dumps(body), content_type="application/json", **extra)


def test_it_authenticates_scripts_with_a_token(owner):
    key = token_for(owner, "ci")
    token = ApiToken.objects.get()
    assert (token.user, token.name, token.prefix, token.last_used) == (owner, "ci", key[:8], None)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()

    response = Client().get("/api/runs", headers={"Authorization": f"Token {key}"})

    assert response.status_code == 200
    assert response.json() == {"runs": [], "next": None}
    token.refresh_from_db()
    assert token.last_used is not None


def test_it_answers_401_without_valid_credentials(owner):
    token_for(owner)

    for headers in ({}, {"Authorization": "Token not-the-key"}, {"Authorization": "Bearer x"}):
        response = Client().get("/api/runs", headers=headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert Client().get("/api/runs").json() == {"error": "authentication required"}
    assert Client().get("/api/runs", headers={"Authorization": "Token nope"}).json() == {"error": "invalid token"}


def test_it_requires_a_csrf_token_for_session_posts_only(owner):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)

    refused = post(browser, "/api/commands", {"command": "echo for tides"})
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("CSRF failed")
    assert browser.get("/api/runs").status_code == 200
    # With the cookie and its header, as the dashboard's JavaScript sends them, it passes.
    browser.cookies["csrftoken"] = "a" * 32
    passed = browser.post("/api/runs/999/cancel", headers={"X-CSRFToken": "a" * 32})
    assert passed.json() == {"error": "run 999 not found"}

    # The cookie-less token request needs none: it gets as far as the lookup.
    script = Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {token_for(owner)}"})
    assert script.post("/api/runs/999/cancel").json() == {"error": "run 999 not found"}


def test_it_answers_a_session_post_with_an_unreadable_form_body_in_json(owner):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    browser.cookies["csrftoken"] = "a" * 32  # the check gets as far as reading the form for its token

    refused = browser.post("/api/commands", b"x", content_type="multipart/form-data")

    assert refused.status_code == 400
    assert refused.json()["error"].startswith("malformed multipart body: ")


def test_it_names_the_problem_with_a_bad_body(owner):
    client = api(owner)

    bad_json = client.post("/api/commands", "{command: 1", content_type="application/json")
    assert bad_json.status_code == 400
    assert bad_json.json() == {
        "error": "invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    }

    deep = client.post("/api/commands", "[" * 100_000 + "]" * 100_000, content_type="application/json")
    assert (deep.status_code, deep.json()) == (400, {"error": "invalid JSON: nested too deeply"})

    wrong_mode = post(client, "/api/commands", {"command": "echo for tides", "mode": "shell"})
    assert wrong_mode.status_code == 400
    assert wrong_mode.json() == {
        "error": "invalid request",
        "problems": [{"field": "mode", "message": "Input should be 'chat' or 'code'"}],
    }

    misspelt = post(client, "/api/commands", {"comand": "echo for tides"})
    assert [p["field"] for p in misspelt.json()["problems"]] == ["command", "comand"]

    too_long = post(client, "/api/commands", {"command": "x" * 4001})
    assert too_long.json()["problems"][0]["field"] == "command"
    assert post(client, "/api/commands", ["echo"]).json()["problems"][0]["field"] == "body"
    assert not Run.objects.exists()


def test_it_answers_json_413_for_a_body_past_the_upload_limit(owner, staff):
    huge = "x" * 3 * 2**20
    limit = "the limit is 2621440 bytes (2.5 MB)"

    command = post(api(owner), "/api/commands", {"command": huge})
    workflow = post(api(staff), "/api/workflows", {"yaml": huge})
    # A session's CSRF check reads a form body before any view does.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    browser.cookies["csrftoken"] = "a" * 32
    form = browser.post("/api/runs/1/cancel", f"note={huge}", content_type="application/x-www-form-urlencoded")

    for response in (command, workflow, form):
        assert response.status_code == 413
        assert response["Content-Type"] == "application/json"
        length = response.wsgi_request.META["CONTENT_LENGTH"]
        assert response.json() == {"error": f"request body too large ({length} bytes): {limit}"}
    assert not Run.objects.exists()


def test_it_answers_json_400_for_too_many_query_parameters(owner):
    response = api(owner).get("/api/runs?" + "&".join(f"p{n}=1" for n in range(1001)))

    assert response.status_code == 400
    assert response.json() == {
        "error": "The number of GET/POST parameters exceeded settings.DATA_UPLOAD_MAX_NUMBER_FIELDS."
    }


def test_it_answers_json_405_for_a_wrong_method(owner):
    response = api(owner).get("/api/commands")

    assert response.status_code == 405
    assert response.json() == {"error": "method GET not allowed"}
    assert response["Allow"] == "POST"


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

    assert response.status_code == 201
    body = response.json()
    assert body["result"]["workflow_selected"] == "echo"
    assert body["result"]["workflow_args"] == {"subject": "tides"}
    run = Run.objects.get(pk=body["run"]["id"])
    assert body["run"]["url"] == f"http://testserver/runs/{run.pk}/"
    assert (run.created_by, run.command) == (owner, "echo for tides")

    wait_for_run(run)
    later = client.get(f"/api/commands/{body['id']}").json()
    assert later["status"] == "success"
    assert later["run"]["status"] == "completed"
    assert "echo: tides" in later["result"]["result"]


def test_it_lists_only_the_users_runs_and_staff_sees_all(owner, teammate, staff):
    relay = register("relay")
    mine = [Run.objects.create(workflow=relay, inputs={"subject": str(n)}, created_by=owner) for n in range(3)]
    theirs = Run.objects.create(workflow=relay, inputs={"subject": "x"}, created_by=teammate, status="completed")
    client = api(owner)

    first = client.get("/api/runs?limit=2").json()
    assert [r["id"] for r in first["runs"]] == [mine[2].pk, mine[1].pk]
    assert first["runs"][0] | {"created": None} == {
        "id": mine[2].pk,
        "url": f"http://testserver/runs/{mine[2].pk}/",
        "workflow": "relay",
        "version": 1,
        "status": "pending",
        "mode": "chat",
        "created_by": "owner",
        "created": None,
        "started": None,
        "finished": None,
        "error": "",
        "result": "",
        "stuck": "",
    }
    assert first["next"] == f"http://testserver/api/runs?limit=2&before={mine[1].pk}"
    second = client.get(first["next"]).json()
    assert ([r["id"] for r in second["runs"]], second["next"]) == ([mine[0].pk], None)

    everyone = api(staff).get("/api/runs").json()["runs"]
    assert [r["id"] for r in everyone] == [theirs.pk, *[r.pk for r in reversed(mine)]]
    assert [r["id"] for r in api(staff).get("/api/runs?status=completed&workflow=relay").json()["runs"]] == [theirs.pk]
    assert api(staff).get("/api/runs?workflow=echo").json()["runs"] == []

    too_many = client.get("/api/runs?limit=500")
    assert too_many.status_code == 400
    assert too_many.json()["problems"] == [{"field": "limit", "message": "Input should be less than or equal to 200"}]


def test_it_returns_exactly_the_events_after_a_seq(owner, teammate):
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=owner)
    Event.objects.bulk_create(Event(run=run, seq=n, type=f"type{n}") for n in range(1, 8))
    client = api(owner)

    body = client.get(f"/api/runs/{run.pk}?after=4").json()

    assert [(e["seq"], e["type"]) for e in body["events"]] == [(5, "type5"), (6, "type6"), (7, "type7")]
    assert (body["next_after"], body["more"]) == (7, False)
    caught_up = client.get(f"/api/runs/{run.pk}?after=7").json()
    assert (caught_up["events"], caught_up["next_after"]) == ([], 7)
    assert client.get(f"/api/runs/{run.pk}?after=-1").json()["problems"][0]["field"] == "after"
    assert api(teammate).get(f"/api/runs/{run.pk}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_it_shows_a_finished_run_with_its_steps_and_result(celery_worker, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tides"}, user=owner))

    body = api(owner).get(f"/api/runs/{run.pk}").json()

    assert (body["status"], body["inputs"], body["approvals"], body["claims"]) == (
        "completed",
        {"subject": "tides"},
        [],
        [],
    )
    steps = {step["step_id"]: step for step in body["steps"]}
    assert set(steps) == {"coordinator", "first", "second"}
    assert (steps["second"]["status"], steps["second"]["output"]) == ("completed", "second done with tides")
    assert [e["seq"] for e in body["events"]] == list(range(1, run.last_event_seq + 1))
    assert body["events"][0]["type"] == "workflow_start"
    assert body["coordinator_result"]["result"] == run.result


def test_it_cancels_a_run_for_a_token_holder(django_capture_on_commit_callbacks, owner, teammate):
    with django_capture_on_commit_callbacks(execute=False):
        run = do_create_run(register("relay"), {"subject": "x"}, user=owner)
    with django_capture_on_commit_callbacks(execute=False):
        do_start_run(run.pk)
    client = api(owner)

    assert api(teammate).post(f"/api/runs/{run.pk}/cancel").status_code == 404
    response = client.post(f"/api/runs/{run.pk}/cancel")
    again = client.post(f"/api/runs/{run.pk}/cancel")

    assert (response.status_code, response.json()) == (200, {"id": run.pk, "status": "cancelled", "cancelled": True})
    assert (again.status_code, again.json()["error"]) == (409, f"run {run.pk} already ended cancelled")


def test_it_keeps_the_approvals_queue_to_approvers(owner, teammate, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()

    refused = api(teammate).get("/api/approvals")
    assert (refused.status_code, refused.json()) == (403, {"error": "the approvals queue needs the approve permission"})
    assert post(api(teammate), f"/api/approvals/{approval.pk}/decide", {}).status_code == 403

    [listed] = api(approver).get("/api/approvals").json()["approvals"]
    assert listed | {"created": None} == {
        "id": approval.pk,
        "run": run.pk,
        "workflow": "wipe",
        "status": "pending",
        "kind": "workflow",
        "step_id": "",
        "what": f"run workflow wipe v{run.workflow.version}",
        "why": "wipe is marked destructive",
        "arguments": {},
        # The command its step will run, as it will run: only that runs on this approval.
        "actions": [
            {
                "agent": "janitor",
                "tool": "run_shell",
                "arguments": {
                    "command": "mkdir -p build && touch build/x && rm -rf build"
                    " && echo wiped >> wipe.log && cat wipe.log"
                },
                "looks_like": "recursive delete (rm -r)",
            }
        ],
        "arguments_hash": approval.arguments_hash,
        "requested_by": "owner",
        "created": None,
        "expires_at": None,
        "decided_at": None,
        "reason": "",
        "required_approvals": 1,
        "approvals": 0,
        "decisions": [],
    }
    assert api(approver).get("/api/approvals?status=approved").json() == {"approvals": [], "next": None}


def approvals_of(run, count: int, **fields) -> list[Approval]:
    """``count`` approvals on ``run``, in id order (their created times may tie)."""
    Approval.objects.bulk_create(
        Approval(run=run, kind="tool", what=f"call {n}", why="y", arguments_hash="0" * 64, **fields)
        for n in range(count)
    )
    return list(run.approvals.order_by("pk"))


def test_it_pages_through_more_pending_approvals_than_fit_on_a_page(owner, approver):
    run = Run.objects.create(workflow=register("approvals/wipe"), created_by=owner, status="running")
    approvals = approvals_of(run, 203)
    client = api(approver)

    first = client.get("/api/approvals?limit=200").json()
    second = client.get(first["next"]).json()

    assert [a["id"] for a in first["approvals"]] == [a.pk for a in approvals[:200]]
    assert first["next"] == f"http://testserver/api/approvals?limit=200&before={approvals[199].pk}"
    assert ([a["id"] for a in second["approvals"]], second["next"]) == ([a.pk for a in approvals[200:]], None)
    assert len(client.get("/api/approvals").json()["approvals"]) == 50
    # A decision between two pages moves nothing that is still pending.
    Approval.objects.filter(pk=approvals[1].pk).update(status="approved")
    page = client.get(f"/api/approvals?limit=2&before={approvals[1].pk}").json()
    assert [a["id"] for a in page["approvals"]] == [approvals[2].pk, approvals[3].pk]


def test_it_pages_decided_approvals_latest_decided_first(owner, approver):
    run = Run.objects.create(workflow=register("approvals/wipe"), created_by=owner, status="completed")
    a, b, c = approvals_of(run, 3, status="lapsed", decided_at=datetime(2025, 3, 1, tzinfo=UTC))
    d = approvals_of(run, 1, status="lapsed", decided_at=datetime(2025, 3, 2, tzinfo=UTC))[-1]
    never = approvals_of(run, 1, status="lapsed")[-1]
    client = api(approver)

    ids, url = [], "/api/approvals?status=lapsed&limit=2"
    while url:
        body = client.get(url).json()
        ids.append([approval["id"] for approval in body["approvals"]])
        url = body["next"]

    assert ids == [[d.pk, c.pk], [b.pk, a.pk], [never.pk]]
    unknown = client.get("/api/approvals?before=999999")
    assert (unknown.status_code, unknown.json()["problems"]) == (
        400,
        [{"field": "before", "message": "no approval 999999"}],
    )


@pytest.mark.django_db(transaction=True)
def test_it_starts_an_awaiting_run_when_approved_and_refuses_a_second_decision(celery_worker, owner, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()
    client = api(approver)
    url = f"/api/approvals/{approval.pk}/decide"

    assert post(client, url, {"decision": "approve", "reason": "  "}).json()["problems"][0]["field"] == "reason"
    empty_hash = post(client, url, {"decision": "approve", "reason": "ok", "arguments_hash": ""})
    assert empty_hash.status_code == 400
    assert [p["field"] for p in empty_hash.json()["problems"]] == ["arguments_hash"]
    stale = post(client, url, {"decision": "approve", "reason": "ok", "arguments_hash": "0" * 64})
    assert (stale.status_code, stale.json()["error"]) == (
        409,
        "the arguments changed since you looked at them: review them again",
    )

    response = post(
        client, url, {"decision": "approve", "reason": "scratch space only", "arguments_hash": approval.arguments_hash}
    )
    again = post(client, url, {"decision": "approve", "reason": "again"})

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["approvals"]) == ("approved", 1)
    assert [(d["user"], d["decision"], d["reason"]) for d in body["decisions"]] == [
        ("approver", "approve", "scratch space only")
    ]
    assert (again.status_code, again.json()) == (409, {"error": f"approval {approval.pk} is already approved"})
    assert post(client, "/api/approvals/999999/decide", {"decision": "reject", "reason": "x"}).status_code == 404
    assert wait_for_run(run).status == Run.Status.COMPLETED


def test_it_registers_a_workflow_or_lists_every_problem_with_its_line(owner, staff):
    client = api(staff)

    broken = post(client, "/api/workflows", {"yaml": BROKEN, "source": "broken.yaml"})
    first = post(client, "/api/workflows", {"yaml": ECHO})
    unchanged = post(client, "/api/workflows", {"yaml": ECHO})

    assert broken.status_code == 400
    body = broken.json()
    assert body["error"] == "invalid workflow"
    problems = {(p["file"], p["line"], p["field"]) for p in body["problems"]}
    assert ("broken.yaml", 6, "steps[0].agent") in problems
    assert ("broken.yaml", 9, "steps[1].colour") in problems
    assert all(p["message"] for p in body["problems"])
    assert (first.status_code, first.json()) == (201, {"name": "echo", "version": 1, "created": True})
    assert (unchanged.status_code, unchanged.json()) == (200, {"name": "echo", "version": 1, "created": False})
    refused = post(api(owner), "/api/workflows", {"yaml": ECHO})
    assert (refused.status_code, refused.json()) == (403, {"error": "registering workflows is for staff"})


def test_it_serves_an_openapi_document_of_every_route():
    response = Client().get("/api/openapi.json")

    assert response.status_code == 200
    document = json.loads(response.content)
    assert document["openapi"] == "3.1.0"
    assert {(path, method) for path, item in document["paths"].items() for method in item} == {
        ("/api/openapi.json", "get"),
        ("/api/commands", "post"),
        ("/api/commands/{command_id}", "get"),
        ("/api/runs", "get"),
        ("/api/runs/{run_id}", "get"),
        ("/api/runs/{run_id}/cancel", "post"),
        ("/api/approvals", "get"),
        ("/api/approvals/{approval_id}/decide", "post"),
        ("/api/workflows", "post"),
    }
    assert set(document["components"]["securitySchemes"]) == {"token", "session"}
    decide = document["paths"]["/api/approvals/{approval_id}/decide"]["post"]
    assert set(decide["responses"]) == {"200", "400", "401", "403", "404", "409", "413"}
    register_workflow = document["paths"]["/api/workflows"]["post"]
    assert {"200", "201"} <= set(register_workflow["responses"])
    approvals = document["paths"]["/api/approvals"]["get"]
    assert {p["name"] for p in approvals["parameters"]} == {"status", "limit", "before"}
    assert "next" in document["components"]["schemas"]["ApprovalList"]["required"]
    schemas = document["components"]["schemas"]
    assert set(schemas["CommandRequest"]["properties"]) == {"command", "mode"}
    # Every reference points at something the document defines.
    text = response.content.decode()
    for kind, name in re.findall(r'"#/components/(schemas|responses)/([^"]+)"', text):
        assert name in document["components"][kind], name


def test_it_answers_head_wherever_it_answers_get(owner):
    client = api(owner)
    got = client.get("/api/runs")

    head = client.head("/api/runs")

    assert (head.status_code, head["Content-Type"], head.content) == (200, "application/json", b"")
    assert head["Content-Length"] == str(len(got.content))
    assert Client().head("/api/runs").status_code == 401
    assert Client().head("/api/openapi.json").status_code == 200
    refused = client.head("/api/workflows")
    assert (refused.status_code, refused["Allow"]) == (405, "POST")
