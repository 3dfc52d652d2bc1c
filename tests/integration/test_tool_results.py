"""What a tool call leaves behind: its metadata, bounds, artifacts (for
people, not the model), an omitted oversized result, and a crash that is
rolled back to its savepoint while the turn goes on."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from pydantic import BaseModel, ConfigDict

from agents.events import Event
from agents.tools import Artifact, Bounds, Tool, ToolAnswer
from runs import live
from runs.actions import REGISTRY, do_create_run
from runs.models import Run
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<script>alert(1)</script>"


class Query(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str
    workspace: str = ""


class Nothing(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _list_things(ctx, args: Query) -> ToolAnswer:
    return ToolAnswer(
        content=[{"name": f"thing {n}"} for n in range(50)],
        bounds=Bounds(returned=50, total=1234, truncated=True, next_cursor="50", refinement_hint="name a colour"),
        artifacts=[
            Artifact("table", {"columns": ["name", "note"], "rows": [["thing 0", XSS]]}, title="Things"),
            Artifact(
                "timeseries",
                {"series": [{"name": XSS, "points": [["2026-01-01", 900], ["2026-02-01", 850], ["2026-03-01", 799]]}]},
                title="Price",
            ),
            Artifact("json", {"secret_for_people_only": "artifact-only-text"}, title="Raw"),
        ],
    )


def _explode(ctx, args: Nothing) -> str:
    # Written inside the turn's transaction, then lost with the savepoint.
    ctx.sink.emit(Event("coordinator_narration", ctx.step_id, {"text": "half-done work"}))
    raise RuntimeError("disk on fire")


def _huge(ctx, args: Nothing) -> str:
    return "x" * 40_000


TEST_TOOLS = [
    Tool(
        "list_things",
        "List things.",
        Query,
        frozenset({"step"}),
        _list_things,
        toolset="testing",
        bounded=True,
        injected=("workspace",),
        server_data=(("table", "evidence"),),
    ),
    # Inline: it writes to the run inside the turn's transaction.
    Tool("explode", "Crash.", Nothing, frozenset({"step"}), _explode, toolset="testing", inline=True),
    Tool("huge", "Return too much.", Nothing, frozenset({"step"}), _huge, toolset="testing"),
]


@pytest.fixture
def test_tools():
    for tool in TEST_TOOLS:
        REGISTRY.add(tool)
    yield
    for tool in TEST_TOOLS:
        REGISTRY._tools.pop(tool.name)


@pytest.fixture
def run(celery_worker, test_tools) -> Run:
    return wait_for_run(do_create_run(register("tools/results"), {}))


def test_it_stores_each_call_with_its_metadata(run):
    call = run.tool_calls.get(name="list_things")

    assert call.tool_call_id == "call-lister-1-1"
    assert call.session_id == f"{run.pk}/lister"
    assert call.turn_id == "lister/1"
    assert call.parent_tool_call_id == ""
    start = run.events.get(type="tool_call", data__phase="start", data__name="list_things")
    assert start.data["meta"] == {
        "run_id": str(run.pk),
        "session_id": f"{run.pk}/lister",
        "turn_id": "lister/1",
        "tool_call_id": "call-lister-1-1",
        "parent_tool_call_id": "",
    }


def test_it_shows_the_model_the_bounds_but_never_the_artifacts(run):
    call = run.tool_calls.get(name="list_things")

    seen = json.loads(call.result)
    assert seen["bounds"] == {
        "returned": 50,
        "total": 1234,
        "truncated": True,
        "next_cursor": "50",
        "refinement_hint": "name a colour",
    }
    assert len(seen["result"]) == 50
    lister = run.steps.get(step_id="lister")
    assert "artifact-only-text" not in json.dumps(lister.transcript)
    assert sorted(call.artifacts.values_list("kind", flat=True)) == ["json", "table", "timeseries"]
    assert call.artifacts.get(kind="table").source_tool == "zenweb.testing.list_things"


def test_it_redacts_injected_fields_in_storage_and_events(run):
    call = run.tool_calls.get(name="list_things")

    assert json.loads(call.arguments) == {"query": "things", "workspace": "[injected]"}
    assert "workspaces" not in json.dumps(list(run.events.values_list("data", flat=True)))


def test_it_rolls_back_what_a_crashing_tool_wrote_and_goes_on(run):
    call = run.tool_calls.get(name="explode")

    assert (call.ok, call.error_kind) == (False, "internal")
    assert call.result.startswith("error: explode failed unexpectedly: RuntimeError: disk on fire")
    assert not run.events.filter(type="coordinator_narration", data__text="half-done work").exists()
    assert_gapless(run)
    assert run.status == Run.Status.COMPLETED


def test_it_replaces_an_oversized_result_with_a_preview(run):
    call = run.tool_calls.get(name="huge")

    seen = json.loads(call.result)
    assert (seen["omitted"], seen["reason"]) == (True, "size_limit")
    assert seen["preview"] == "x" * 1000
    assert call.omitted is True


def test_it_draws_bounds_and_artifacts_on_the_run_page_as_text(run, client, owner):
    Run.objects.filter(pk=run.pk).update(created_by=owner)
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert "50 of 1,234, truncated" in html
    assert "name a colour" in html
    assert "<svg viewBox=" in html and "<polyline" in html
    assert "artifact-only-text" in html
    assert "omitted: size limit" in html
    assert XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_it_sends_the_tool_calls_again_when_they_change(run):
    html, _ = live.render_update(run.pk, 0)

    assert '<section class="card" id="tool-calls" hx-swap-oob="true">' in html
    assert "50 of 1,234, truncated" in html


@pytest.mark.sandbox
@pytest.mark.parametrize("approved", [False, True])
def test_it_refuses_destructive_shell_commands_unless_the_run_is_approved(celery_worker, approved):
    with transaction.atomic():
        created = do_create_run(register("tools/cleanup"), {})
        Run.objects.filter(pk=created.pk).update(destructive_approved=approved)
    run = wait_for_run(created)

    call = run.tool_calls.get(name="run_shell")
    if approved:
        assert call.ok and "cleaned" in call.result
    else:
        assert (call.ok, call.error_kind) == (False, "domain_rejection")
        assert "recursive delete (rm -r)" in call.result
    assert run.status == Run.Status.COMPLETED
