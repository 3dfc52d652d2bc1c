"""A workflow whose agent calls MCP tools (server-everything over stdio)
runs to completion through the worker, and the run and catalog pages show
the calls and the servers."""

from __future__ import annotations

import json
import time

import pytest

from agents.spec import parse_workflow
from agents.tools.mcp import McpServerConfig
from agents.tools.mcp.servers import POOL
from runs.actions import do_create_run
from runs.actions.tooling import tools_for
from runs.models import Run, Workflow
from tests.conftest import WORKFLOWS, register, wait_for_run
from tests.mcp.servers import EVERYTHING, require_servers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]


@pytest.fixture
def everything(settings):
    """server-everything as the operator configures it: in settings, by name."""
    require_servers()
    settings.ZENWEB_MCP_SERVERS = {
        "everything": McpServerConfig(
            name="everything", command=str(EVERYTHING), args=["stdio"], timeout=10, tools=["echo", "get-sum"]
        )
    }
    yield
    POOL.close_all()


@pytest.fixture
def run(celery_worker, everything, owner) -> Run:
    created = do_create_run(register("mcp/echo"), {})
    Run.objects.filter(pk=created.pk).update(created_by=owner)
    return wait_for_run(created)


def test_it_runs_a_workflow_whose_agent_calls_mcp_tools_and_the_run_page_shows_them(run, client, owner):
    calls = {(c.name, c.ok): c for c in run.tool_calls.all()}

    assert run.status == Run.Status.COMPLETED
    echo = calls[("everything__echo", True)]
    assert echo.result == "Echo: hello from zenweb"
    assert json.loads(echo.arguments) == {"message": "hello from zenweb"}
    assert echo.session_id == f"{run.pk}/call"
    invalid = calls[("everything__get-sum", False)]
    assert invalid.error_kind == "invalid_call" and '"missing_fields": ["b"]' in invalid.result
    assert "is 42" in calls[("everything__get-sum", True)].result

    client.force_login(owner)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "everything__echo" in html and "Echo: hello from zenweb" in html


def test_the_catalog_lists_mcp_servers_by_name_with_status_and_why_one_failed(
    everything, client, owner, staff, settings
):
    settings.ZENWEB_MCP_SERVERS = {
        **settings.ZENWEB_MCP_SERVERS,
        "broken": McpServerConfig(name="broken", command="/nonexistent/mcp-server"),
    }
    register("mcp/echo")
    client.force_login(owner)

    html = client.get("/catalog/").content.decode()

    assert 'id="mcp-server-broken"' in html and "failed" in html
    assert 'id="mcp-server-everything"' in html and "running" in html
    assert "mcp_echo" in html  # the workflow that names the server
    assert 'id="tool-mcp.everything.echo"' in html
    # Names, never command lines (nor an error that repeats one) for everyone.
    assert "/nonexistent/mcp-server" not in html and str(EVERYTHING) not in html
    client.force_login(staff)
    assert "command not found: /nonexistent/mcp-server" in client.get("/catalog/").content.decode()


def test_registering_a_workflow_that_starts_its_own_mcp_server_is_refused(everything, tmp_path):
    from agents.spec import WorkflowValidationError
    from runs.actions import do_register_workflow

    marker = tmp_path / "owned"
    text = (WORKFLOWS / "mcp" / "echo.yaml").read_text()
    text = text.replace(
        "mcp: [everything]", f"mcp:\n  everything:\n    command: /bin/sh\n    args: [-c, 'id > {marker}']"
    )

    with pytest.raises(WorkflowValidationError) as caught:
        do_register_workflow(text, "evil.yaml")

    assert str(caught.value.problems[0]).startswith("evil.yaml:4: mcp: MCP servers are configured by the operator")
    assert not Workflow.objects.exists()
    assert not marker.exists()


def test_an_mcp_tool_on_the_approval_list_waits_for_a_person_then_runs_once(celery_worker, everything, owner, approver):
    from runs.actions.approvals import do_decide

    run = do_create_run(register("mcp/gated_echo"), {}, user=owner)
    deadline = time.monotonic() + 20
    while not run.approvals.filter(status="pending").exists():
        assert time.monotonic() < deadline, "the MCP call never asked for approval"
        time.sleep(0.05)
    approval = run.approvals.get()
    assert (approval.kind, approval.arguments) == ("tool", {"message": "approved words"})
    assert "everything__echo" in approval.what
    assert run.tool_calls.get(name="everything__echo").status == "waiting"

    do_decide(approval.pk, approver, "approve", "harmless echo")
    run = wait_for_run(run)

    assert run.status == Run.Status.COMPLETED, run.error
    call = run.tool_calls.get(name="everything__echo")
    assert (call.status, call.result) == ("done", "Echo: approved words")


def test_a_run_gets_the_tools_of_the_mcp_servers_its_workflow_names_and_no_others(settings):
    # What a coordinator grants a worker goes through tools_for too: a
    # server the workflow does not name stays out of reach.
    settings.ZENWEB_MCP_SERVERS = {
        name: McpServerConfig(name=name, command="/nonexistent/mcp-server") for name in ("everything", "tracker")
    }
    spec = parse_workflow(
        "name: scoped\nmcp: [everything]\n"
        "agents: {worker: {description: worker agent}}\nsteps: [{id: one, agent: worker}]\n",
        "scoped.yaml",
    )

    _, granted = tools_for(spec, "step", ["everything__echo", "tracker__create_issue"])

    assert [tool.name for tool in granted if "__" in tool.name] == ["everything__echo"]
