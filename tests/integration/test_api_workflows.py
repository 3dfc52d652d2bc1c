"""Registering workflows over the JSON API: staff only, every problem listed
with its line."""

from __future__ import annotations

import pytest

from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db

BROKEN = """\
name: broken
agents:
  a: {description: a agent, system: hi}
steps:
  - id: one
    agent: ghost
  - id: two
    agent: a
    colour: blue
"""


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
