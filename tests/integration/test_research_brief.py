"""The demo catalog's research_brief: a coordinator plans workers that use
bounded search, a price chart and the workspace, all visible on the run page."""

from __future__ import annotations

import json

import jsonschema
import pytest
from django.conf import settings

from agents.tools import default_registry
from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(celery_worker, owner) -> Run:
    return wait_for_run(do_create_run(register("research_brief"), {}, user=owner), timeout=60)


def test_it_completes_with_three_planned_workers(run):
    assert run.status == Run.Status.COMPLETED, run.error
    assert list(run.steps.filter(kind="step").values_list("step_id", "agent")) == [
        ("worker-1", "researcher"),
        ("worker-2", "analyst"),
        ("worker-3", "writer"),
    ]
    assert_gapless(run)


def test_it_pages_a_bounded_search_with_its_cursor(run):
    first, second = run.tool_calls.filter(name="search").order_by("id")

    assert first.bounds["returned"] == 5 and first.bounds["truncated"] is True
    assert first.bounds["next_cursor"] == "5"
    seen_first = {f["url"] for f in json.loads(first.result)["result"]["findings"]}
    seen_second = {f["url"] for f in json.loads(second.result)["result"]["findings"]}
    assert seen_first and seen_second and not seen_first & seen_second
    finding = json.loads(first.result)["result"]["findings"][0]
    assert {"title", "url", "source_name", "source_domain", "source_type", "source_ref"} <= set(finding)
    assert first.artifacts.get().kind == "table"


def test_it_charts_the_price_history_for_people_only(run):
    call = run.tool_calls.get(name="price_history")

    chart = call.artifacts.get()
    assert chart.kind == "timeseries"
    assert chart.data["series"][0]["points"]
    assert '"points"' not in call.result
    assert json.loads(call.result)["result"]["title"].startswith("Aster Swift 14")


def test_it_writes_the_brief_into_the_run_workspace_with_the_path_injected(run):
    brief = settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "brief.md"

    assert brief.read_text().startswith("# Brief: laptops under $1000")
    write = run.tool_calls.get(name="write_file")
    assert json.loads(write.arguments)["workspace"] == "[injected]"
    assert str(settings.ZENWEB_WORKSPACES) not in json.dumps(list(run.events.values_list("data", flat=True)))
    # The worker's calls say which spawn_worker call they work for.
    spawn = run.tool_calls.get(name="spawn_worker", result__contains='"step_id": "worker-3"')
    assert write.parent_tool_call_id == spawn.tool_call_id


def test_it_shows_bounds_chart_and_table_on_the_run_page(run, client, owner):
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert "5 of " in html and ", truncated" in html
    assert "pass next_cursor for more" in html
    assert "<polyline" in html
    assert "artifact-table" in html


def test_every_call_the_model_saw_is_its_tools_published_result(run):
    """What each tool answered, as stored and shown on the run page, is an
    instance of the result schema tool_schemas.json publishes for it."""
    schemas = {
        entry["id"].rsplit(".", 1)[1]: entry["result"]["schema"] for entry in default_registry().catalog()["tools"]
    }
    calls = list(run.tool_calls.filter(ok=True))

    assert {"spawn_worker", "search", "price_history", "write_file", "finalize"} <= {c.name for c in calls}
    for call in calls:
        jsonschema.validate(json.loads(call.result), schemas[call.name])
