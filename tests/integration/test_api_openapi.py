"""The JSON API's OpenAPI document of every route, and HEAD answered
wherever GET is."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from tests.integration.api_client import api

pytestmark = pytest.mark.django_db


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
        ("/api/runs/{run_id}/fork", "post"),
        ("/api/approvals", "get"),
        ("/api/approvals/{approval_id}/decide", "post"),
        ("/api/questions", "get"),
        ("/api/questions/{question_id}/answer", "post"),
        ("/api/workflows", "post"),
        ("/api/schemas/{name}", "get"),
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
    assert set(schemas["CommandRequest"]["properties"]) == {"command", "mode", "context"}
    assert document["paths"]["/api/schemas/{name}"]["get"]["security"] == []  # public
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
