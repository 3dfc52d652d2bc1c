"""A tool call stopped by a cancel is `cancelled`, not `failed`: in the
tool-call table, on the run page, in the API (and its OpenAPI enum) and in
the export."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_cancel_run, do_create_run, do_start_run, tool_tasks
from runs.actions import steps as step_actions
from runs.models import Step, ToolCall
from tests.conftest import register
from tests.integration.api_client import api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cancelled_call(settings, tmp_path, owner) -> ToolCall:
    """A run whose step queued a run_shell call, cancelled before any worker ran it."""
    settings.ZENWEB_WORKSPACES = tmp_path
    run = do_create_run(register("tools/appender_tasks"), {}, user=owner)
    do_start_run(run.pk)
    step = Step.objects.get(run=run, step_id="append")
    step_actions.do_step_turn(step.pk, 1)
    assert do_cancel_run(run.pk, "cancelled by owner")
    return ToolCall.objects.get(step=step)


def test_a_call_a_cancel_stopped_is_cancelled_in_the_table_and_its_event(cancelled_call):
    assert (cancelled_call.status, cancelled_call.ok) == (ToolCall.Status.CANCELLED, False)
    assert "run_shell was stopped: the run ended cancelled" in cancelled_call.result
    result = cancelled_call.run.events.get(type="tool_result")
    assert result.data["status"] == "cancelled"


def test_the_run_page_api_and_export_show_it_cancelled(cancelled_call, owner, client):
    client.force_login(owner)
    page = client.get(f"/runs/{cancelled_call.run_id}/").content.decode()
    assert f'<tr id="call-{cancelled_call.pk}" class="call-cancelled">' in page
    assert '<span class="badge cancelled"' in page

    body = api(owner).get(f"/api/runs/{cancelled_call.run_id}").json()
    assert [(c["name"], c["status"], c["ok"]) for c in body["tool_calls"]] == [("run_shell", "cancelled", False)]
    schema = api(owner).get("/api/openapi.json").json()
    assert "cancelled" in schema["components"]["schemas"]["ToolCallOut"]["properties"]["status"]["enum"]

    exported = json.loads(b"".join(client.get(f"/runs/{cancelled_call.run_id}/export.json").streaming_content))
    assert [(c["name"], c["status"]) for c in exported["tool_calls"]] == [("run_shell", "cancelled")]


def test_a_call_stopped_because_its_run_or_step_was_cancelled_is_cancelled_and_otherwise_failed():
    assert tool_tasks._stopped_status("running", "cancelled") == ToolCall.Status.CANCELLED
    assert tool_tasks._stopped_status("cancelled", "running") == ToolCall.Status.CANCELLED
    assert tool_tasks._stopped_status("failed", "running") == ToolCall.Status.FAILED
