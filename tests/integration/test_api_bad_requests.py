"""Requests the JSON API refuses, each answered in JSON: a bad body, one past
the upload limit, too many query parameters, a wrong method."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db


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
