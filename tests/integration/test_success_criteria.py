"""Success criteria and constraints, as a client of the API meets them: a
workflow's successCriteria and the budget and count a command states are
checked against the run's claims, and a failed one blocks the command."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db(transaction=True)


def finished(client, body: dict) -> dict:
    wait_for_run(Run.objects.get(pk=body["run"]["id"]))
    return client.get(f"/api/commands/{body['id']}").json()


def test_a_claim_over_the_commands_budget_blocks_the_command(celery_worker, owner):
    register("commands/pricey")
    client = api(owner)

    body = finished(
        client, post(client, "/api/commands", {"command": "Run pricey workflow for laptops under $1000"}).json()
    )

    assert body["run"]["status"] == "completed"
    result = body["result"]
    assert (body["status"], result["requires_retry"]) == ("blocked", True)
    over = "'Korvo Pro 16 @ $1,499' over the budget of $1,000"
    assert result["error"] == (
        f"success criterion not met: every price within the budget ({over}); "
        f"constraint violated: budget: at most $1,000 ({over})"
    )
    assert [(c["criterion"], c["met"]) for c in result["criteria"]] == [
        ("every claim has a url", True),
        ("at least 2 claims", True),
        ("every price within the budget", False),
    ]
    assert result["constraints"] == [{"constraint": "budget: at most $1,000", "status": "violated", "why": over}]


def test_claims_within_the_budget_and_count_succeed_with_each_check_recorded(celery_worker, owner):
    register("commands/pricey")
    client = api(owner)

    body = finished(
        client,
        post(client, "/api/commands", {"command": "Run pricey workflow for the top 3 laptops under $1500"}).json(),
    )

    assert (body["status"], body["result"]["requires_retry"]) == ("success", False)
    assert all(c["met"] for c in body["result"]["criteria"])
    assert body["result"]["constraints"] == [
        {"constraint": "budget: at most $1,500", "status": "satisfied", "why": "every price stated is at most $1,500"},
        {"constraint": "count: at most 3", "status": "satisfied", "why": "2 priced claims recorded"},
    ]


def test_more_claims_than_the_command_asks_for_violate_its_count(celery_worker, owner):
    register("commands/pricey")
    client = api(owner)

    body = finished(
        client, post(client, "/api/commands", {"command": "Run pricey workflow for the top 1 laptop"}).json()
    )

    assert body["status"] == "blocked"
    assert body["result"]["error"] == "constraint violated: count: at most 1 (2 priced claims recorded)"
    # No budget stated: the price criterion holds, and says why.
    assert body["result"]["criteria"][2] == {
        "criterion": "every price within the budget",
        "met": True,
        "why": "the command states no budget",
    }


UNCHECKABLE = """\
name: vague
successCriteria:
  - at least 3 claims
  - the answer is good
steps:
  - id: one
    instructions: hi
"""


def test_a_criterion_zenweb_cannot_check_is_refused_with_its_line(staff):
    refused = post(api(staff), "/api/workflows", {"yaml": UNCHECKABLE, "source": "vague.yaml"})

    assert refused.status_code == 400
    [problem] = refused.json()["problems"]
    assert (problem["file"], problem["line"], problem["field"]) == ("vague.yaml", 4, "successCriteria[1]")
    assert problem["message"].startswith(
        "'the answer is good' is not a success criterion zenweb can check; use one of: every claim has a url;"
    )


def test_the_model_is_told_the_workflows_criteria(celery_worker, openai_endpoint):
    openai_endpoint.push_text("Two laptops priced.")

    run = wait_for_run(do_create_run(register("commands/priced_openai"), {}))

    assert run.status == Run.Status.COMPLETED
    [request] = openai_endpoint.requests
    assert request.body["messages"][1] == {
        "role": "user",
        "content": "Price the laptops.\n\n## Success criteria\n"
        "The run's claims are checked against these when it ends:\n"
        "- every claim has a url and a source_ref\n- every price within the budget",
    }


def test_the_coordinator_is_told_the_workflows_criteria(celery_worker, openai_endpoint):
    finalize = ("call_fin", "finalize", json.dumps({"summary": "Priced."}))
    openai_endpoint.push_tool_calls([finalize])
    openai_endpoint.push_text("done")

    run = wait_for_run(do_create_run(register("commands/criteria_coordinator"), {}))

    assert run.status == Run.Status.COMPLETED
    system = openai_endpoint.requests[0].body["messages"][0]["content"]
    assert (
        "Its success criteria (the run's claims are checked against them when it ends):\n"
        "- at least 1 claim\n- every price within the budget\n"
    ) in system
