"""A run as a JSON file, from the run's URL and from the admin; the admin's
run actions and filters."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from runs.models import (
    Approval,
    ApprovalDecision,
    Artifact,
    Claim,
    Command,
    Event,
    Message,
    Run,
    Step,
    ToolCall,
)
from tests.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def full_run(owner, approver):
    """A run with some of everything a run can have."""
    run = Run.objects.create(
        workflow=register("relay"),
        created_by=owner,
        inputs={"subject": "tides"},
        command="relay the tides",
        status=Run.Status.COMPLETED,
        result="second says: tides",
    )
    first = Step.objects.create(
        run=run, step_id="first", agent="a", position=1, status="completed", transcript=[{"role": "user"}]
    )
    Step.objects.create(run=run, step_id="second", agent="a", position=2, status="completed")
    Message.objects.create(run=run, message_id="m1", sender="first", recipient="second", type="info", content="hi")
    Event.objects.bulk_create(
        [Event(run=run, seq=seq, type="agent_turn", step_id="first", data={"turn": seq}) for seq in range(1, 6)]
    )
    call = ToolCall.objects.create(
        run=run, step=first, tool_call_id="call-1", name="search", arguments='{"q": "tides", "token": "***"}'
    )
    Artifact.objects.create(run=run, tool_call=call, kind="json", source_tool="search", data={"rows": 3})
    Claim.objects.create(run=run, step_id="first", tool_call=call, claim="tides are tidal", confidence=0.9)
    approval = Approval.objects.create(
        run=run, kind="tool", step_id="first", what="delete", why="cleanup", arguments_hash="abc", requested_by=owner
    )
    ApprovalDecision.objects.create(
        approval=approval, user=approver, decision="approve", reason="fine", arguments_hash="abc"
    )
    Command.objects.create(text="relay the tides", created_by=owner, run=run, status="success", result={"ok": True})
    return run


def test_it_exports_every_part_of_a_run(client, owner, full_run):
    client.force_login(owner)

    response = client.get(f"/runs/{full_run.pk}/export.json")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response["Content-Disposition"] == f'attachment; filename="run-{full_run.pk}.json"'
    doc = streamed_json(response)
    run = doc["run"]
    assert run["id"] == full_run.pk
    assert run["workflow"] == {"id": full_run.workflow_id, "name": "relay", "version": 1}
    assert (run["inputs"], run["status"], run["result"], run["created_by"]) == (
        {"subject": "tides"},
        "completed",
        "second says: tides",
        "owner",
    )
    assert run["created"] == full_run.created.isoformat()
    counts = {part: len(doc[part]) for part in ("steps", "messages", "events", "tool_calls", "artifacts", "claims")}
    assert counts == {"steps": 2, "messages": 1, "events": 5, "tool_calls": 1, "artifacts": 1, "claims": 1}
    assert doc["steps"][0]["transcript"] == [{"role": "user"}]
    assert [event["seq"] for event in doc["events"]] == [1, 2, 3, 4, 5]
    assert doc["events"][0]["data"] == {"turn": 1}
    call = doc["tool_calls"][0]
    assert (call["step_id"], call["arguments"]) == ("first", '{"q": "tides", "token": "***"}')
    assert doc["artifacts"][0]["tool_call"] == call["id"]
    [approval] = doc["approvals"]
    assert approval["requested_by"] == "owner"
    assert [(d["user"], d["decision"]) for d in approval["decisions"]] == [("approver", "approve")]
    assert (doc["command"]["text"], doc["command"]["result"]) == ("relay the tides", {"ok": True})


def test_a_run_without_a_command_exports_none(client, owner):
    run = Run.objects.create(workflow=register("relay"), created_by=owner)
    client.force_login(owner)

    doc = streamed_json(client.get(f"/runs/{run.pk}/export.json"))

    assert doc["command"] is None
    assert doc["events"] == doc["steps"] == doc["approvals"] == []


def test_the_export_is_404_for_others(client, teammate, staff, full_run):
    client.force_login(teammate)
    assert client.get(f"/runs/{full_run.pk}/export.json").status_code == 404

    client.force_login(staff)
    assert client.get(f"/runs/{full_run.pk}/export.json").status_code == 200


def test_the_admin_cancels_selected_runs(admin_client, owner):
    workflow = register("relay")
    running = Run.objects.create(workflow=workflow, created_by=owner, status=Run.Status.RUNNING)
    Step.objects.create(run=running, step_id="coordinator", kind=Step.Kind.COORDINATOR, agent="c", status="running")
    Step.objects.create(run=running, step_id="first", agent="a", position=1, status="running")
    done = Run.objects.create(workflow=workflow, created_by=owner, status=Run.Status.COMPLETED)

    response = admin_client.post(
        "/admin/runs/run/", {"action": "cancel_runs", "_selected_action": [running.pk, done.pk]}, follow=True
    )

    running.refresh_from_db()
    done.refresh_from_db()
    assert (running.status, running.error) == ("cancelled", "cancelled by admin (admin)")
    assert set(running.steps.values_list("status", flat=True)) == {"cancelled"}
    assert running.events.filter(type="workflow_end").exists()
    assert done.status == "completed"
    assert "Cancelled 1 run(s); 1 had already ended." in response.content.decode()


def test_the_admin_exports_selected_runs_as_one_json_file(admin_client, owner, full_run):
    other = Run.objects.create(workflow=full_run.workflow, created_by=owner)

    response = admin_client.post(
        "/admin/runs/run/", {"action": "export_runs", "_selected_action": [other.pk, full_run.pk]}
    )

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="runs.json"'
    runs = streamed_json(response)["runs"]
    assert [doc["run"]["id"] for doc in runs] == [full_run.pk, other.pk]
    assert len(runs[0]["events"]) == 5


def test_the_admin_filters_and_searches_runs(admin_client, owner, teammate):
    workflow = register("relay")
    mine = Run.objects.create(workflow=workflow, created_by=owner, command="laptops", status=Run.Status.RUNNING)
    theirs = Run.objects.create(workflow=workflow, created_by=teammate, status=Run.Status.FAILED)

    def shown(**params) -> set[int]:
        response = admin_client.get("/admin/runs/run/", params)
        assert response.status_code == 200
        return {run.pk for run in response.context["cl"].result_list}

    assert shown(status__exact="running") == {mine.pk}
    assert shown(workflow__name="relay") == {mine.pk, theirs.pk}
    assert shown(created_by__id__exact=teammate.pk) == {theirs.pk}
    assert shown(q="laptops") == {mine.pk}
    assert shown(q=str(theirs.pk)) == {theirs.pk}
    assert admin_client.get(f"/admin/runs/run/{mine.pk}/change/").status_code == 200


def test_the_admin_lists_the_events_of_one_run(admin_client, owner, full_run):
    other = Run.objects.create(workflow=full_run.workflow, created_by=owner)
    Event.objects.create(run=other, seq=1, type="workflow_start")

    response = admin_client.get("/admin/runs/event/", {"run": other.pk})

    assert response.status_code == 200
    assert [(e.run_id, e.seq) for e in response.context["cl"].result_list] == [(other.pk, 1)]
    assert len(admin_client.get("/admin/runs/event/").context["cl"].result_list) == 6


@pytest.mark.parametrize("model", ["run", "message", "command", "claim", "approval", "event"])
def test_it_offers_no_add_form_for_what_only_zenweb_writes(admin_client, model):
    # Their fields are all read-only: saving the form failed on NOT NULL (a
    # 500), or stored a command whose page could not be shown.
    assert admin_client.get(f"/admin/runs/{model}/add/").status_code == 403
    assert f'href="/admin/runs/{model}/add/"' not in admin_client.get(f"/admin/runs/{model}/").content.decode()


def test_a_big_runs_export_is_written_as_it_is_read_in_bounded_memory(client, owner):
    # 20,000 events of about 600 bytes: a 12 MB file, which an export built
    # whole would hold twice (its rows, then its text) before sending a byte.
    run = Run.objects.create(workflow=register("relay"), created_by=owner, last_event_seq=20_000)
    note = "tide " * 100
    Event.objects.bulk_create(
        Event(run=run, seq=seq, type="coordinator_narration", data={"text": f"{seq} {note}"})
        for seq in range(1, 20_001)
    )
    client.force_login(owner)

    tracemalloc.start()
    try:
        response = client.get(f"/runs/{run.pk}/export.json")
        size = events = 0
        for piece in response.streaming_content:
            size += len(piece)
            events += piece.count(b'"coordinator_narration"')
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert (events, size > 12_000_000) == (20_000, True)
    assert peak < size / 2, f"{peak:,} bytes at the peak for a {size:,}-byte export"


def streamed_json(response):
    """An export's document: it is streamed, as it is written."""
    assert response.streaming
    return json.loads(b"".join(response.streaming_content))


def test_the_admin_lists_the_runs_under_way_that_are_stuck(admin_client, owner):
    workflow = register("relay")
    stuck = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, stuck_reason="no progress for 130s")
    Run.objects.create(workflow=workflow, status=Run.Status.RUNNING)
    Run.objects.create(workflow=workflow, status=Run.Status.FAILED, stuck_reason="ended since")

    response = admin_client.get("/admin/runs/run/", {"stuck": "yes"})

    assert [run.pk for run in response.context["cl"].result_list] == [stuck.pk]
    assert "no progress for 130s" in response.content.decode()
