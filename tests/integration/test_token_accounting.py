"""Token accounting: totals by role on the run page, in the API and the
export; the per-invocation budgets of the workflow handler (a compact
catalog) and of the coordinator, recorded where people look."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.handler import DEFAULT_BUDGET_TOKENS
from runs.actions import do_create_run, do_register_workflow
from runs.actions.budgets import token_totals
from runs.actions.commands import do_command
from runs.export import export_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

# Tests with a worker get a transactional database from the celery_worker fixture.
pytestmark = pytest.mark.django_db


@pytest.fixture
def run(owner) -> Run:
    """A finished run whose coordinator used 12% of its 1,000 tokens."""
    run = Run.objects.create(workflow=register("relay"), created_by=owner, status="completed")
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", **tokens(100, 20))
    Step.objects.create(run=run, step_id="first", agent="relay", position=1, **tokens(500, 50))
    Step.objects.create(run=run, step_id="second", agent="relay", position=2, **tokens(200, 30))
    Step.objects.create(run=run, step_id="w1", agent="worker", position=3, spawned_by="call-1", **tokens(90, 10))
    return run


def tokens(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def flow_yaml(name: str, description: str = "", options: str = "") -> str:
    return (
        f"name: {name}\ndescription: {description!r}\ntriggers: [{name} please]\n{options}"
        "agents: {a: {description: a agent}}\nsteps: [{id: s, agent: a}]\n"
    )


def test_it_totals_tokens_by_role_in_one_query(run):
    with CaptureQueriesContext(connection) as queries:
        totals = token_totals(run)

    assert len(queries) == 1
    assert totals.as_data() == {
        "total": {"prompt": 890, "completion": 110, "total": 1000},
        "coordinator": {"prompt": 100, "completion": 20, "total": 120},
        "steps": {"prompt": 700, "completion": 80, "total": 780},
        "workers": {"prompt": 90, "completion": 10, "total": 100},
        "coordination_overhead_percent": 12.0,
    }


def test_the_run_page_shows_tokens_by_role_and_the_coordination_overhead(run, client, owner):
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert "1000 tokens (coordinator 120, steps 780, workers 100)" in html
    assert '<span id="coordination-overhead"' in html
    assert "coordination overhead 12.0%</span>" in html


def test_the_api_and_the_export_carry_the_totals(run, client, owner):
    client.force_login(owner)

    body = client.get(f"/api/runs/{run.pk}").json()
    exported = export_run(run)

    assert body["tokens"]["coordinator"] == {"prompt": 100, "completion": 20, "total": 120}
    assert body["tokens"]["coordination_overhead_percent"] == 12.0
    assert {s["step_id"]: s["prompt_tokens"] for s in body["steps"]}["w1"] == 90
    assert exported["tokens"] == body["tokens"]


def test_a_scripted_run_records_what_its_turns_reported(celery_worker, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tea"}, user=owner))

    turns = run.events.filter(type="agent_turn").values_list("step_id", "data")
    totals = token_totals(run)

    assert run.status == "completed"
    assert totals.coordinator.total > 0 and totals.steps.total > 0
    assert totals.all.prompt == sum(data["prompt_tokens"] for _, data in turns)
    assert totals.coordinator.completion == sum(d["completion_tokens"] for s, d in turns if s == "coordinator")


def test_it_records_and_shows_a_compacted_catalog(celery_worker, client, owner):
    # Forty workflows with long descriptions: the full catalog is far past the budget.
    for n in range(40):
        do_register_workflow(flow_yaml(f"flow_{n}", "A workflow with a long description. " * 12), "<test>")

    command = do_command("Run flow_3 please", user=owner)
    run = wait_for_run(command.run)
    event = run.events.get(type="catalog_compacted")
    client.force_login(owner)
    command_page = client.get(f"/commands/{command.pk}/").content.decode()
    run_page = client.get(f"/runs/{run.pk}/").content.decode()

    assert command.compact_catalog and run.workflow.name == "flow_3"
    assert event.data["budget_tokens"] == DEFAULT_BUDGET_TOKENS
    assert event.data["full_tokens"] > DEFAULT_BUDGET_TOKENS > event.data["compact_tokens"]
    assert (
        f"{event.data['full_tokens']} tokens in full, {event.data['compact_tokens']} compact,"
        f" budget {DEFAULT_BUDGET_TOKENS}"
    ) in command_page
    assert "catalog sent compact: " in run_page


def test_a_command_that_starts_nothing_still_says_its_catalog_was_compacted(client, owner):
    for n in range(40):
        do_register_workflow(flow_yaml(f"flow_{n}", "A workflow with a long description. " * 12), "<test>")

    command = do_command("Do something", user=owner)
    client.force_login(owner)
    page = client.get(f"/commands/{command.pk}/").content.decode()

    assert command.run is None and command.compact_catalog
    assert f"stay within the coordinator's token budget ({DEFAULT_BUDGET_TOKENS} tokens)" in page


def test_it_records_a_coordinator_prompt_past_its_invocation_budget(celery_worker, client, owner):
    yaml = flow_yaml("tight", options="options: {budget: {coordinatorTokens: 20}}\n")
    workflow, _ = do_register_workflow(yaml, "<test>")

    run = wait_for_run(do_create_run(workflow, {}, user=owner))
    events = list(run.events.filter(type="coordinator_over_budget").values_list("data", flat=True))
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()

    # Recorded, not fatal: only the run budget ends a run.
    assert run.status == "completed"
    finish = next(data for data in events if data["reason"] == "finish")
    assert finish["budget_tokens"] == 20 and finish["prompt_tokens"] > 20
    assert finish["compacted"] is True and finish["compact_tokens"] <= finish["prompt_tokens"]
    assert "finish prompt " in page and "budget 20" in page
