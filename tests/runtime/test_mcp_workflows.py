"""Workflows that use MCP servers: they name the servers the operator
configured and list their tools, and can never say how to start or reach one."""

from __future__ import annotations

import pytest

from agents.spec import WorkflowValidationError, parse_workflow

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("local_mcp_servers_allowed")]

WORKFLOW = """\
name: uses-mcp
mcp: [everything]
agents:
  caller:
    description: caller agent
    tools: [everything__echo]
steps:
  - id: call
    agent: caller
approvals: [everything__echo]
"""


# What registration knows of a configured server that is down.
CONFIGURED = ["send_message", "everything__*"]


def test_a_workflow_names_configured_servers_and_lists_their_tools():
    spec = parse_workflow(WORKFLOW, known_tools=CONFIGURED)

    assert spec.mcp == ["everything"]
    assert spec.approvals == ["everything__echo"]
    assert type(spec).model_validate(spec.to_data()).mcp == spec.mcp


def test_a_workflow_gets_file_and_line_errors_for_unknown_servers():
    text = WORKFLOW.replace("[everything]", "[everything, other]")

    with pytest.raises(WorkflowValidationError) as caught:
        parse_workflow(text, "flow.yaml", known_tools=CONFIGURED)

    assert [str(p) for p in caught.value.problems] == [
        "flow.yaml:2: mcp[1]: no MCP server 'other' is configured (ZENWEB_MCP_SERVERS: everything)"
    ]


@pytest.mark.parametrize(
    ("server", "found"),
    [
        ("{command: /bin/sh, args: [-c, 'id > /tmp/owned']}", "found args, command"),
        ("{url: 'http://169.254.169.254/latest/meta-data'}", "found url"),
        ("{url: 'https://mcp.example.net', headers: {X-Key: '${HOME}'}}", "found headers, url"),
    ],
)
def test_a_workflow_cannot_say_how_to_start_or_reach_an_mcp_server(server, found):
    text = WORKFLOW.replace("mcp: [everything]", f"mcp:\n  everything: {server}")

    with pytest.raises(WorkflowValidationError) as caught:
        parse_workflow(text, "flow.yaml", known_tools=CONFIGURED)

    [problem] = [str(p) for p in caught.value.problems if "mcp" in str(p).split(":")[2]]
    assert problem.startswith(
        "flow.yaml:2: mcp: MCP servers are configured by the operator (ZENWEB_MCP_SERVERS), not in a workflow: "
        "name the configured servers this workflow uses (mcp: [everything])"
    )
    assert found in problem


def test_a_workflow_never_gets_the_servers_environment_expanded():
    text = WORKFLOW.replace("mcp: [everything]", "mcp:\n  everything: {url: 'https://x.test/?h=${HOME}'}")

    with pytest.raises(WorkflowValidationError, match=r"nothing a workflow says is expanded .*\$\{VAR\}"):
        parse_workflow(text, "flow.yaml", known_tools=CONFIGURED)


def test_a_stored_version_with_server_configs_keeps_only_their_names():
    spec = parse_workflow(WORKFLOW, known_tools=CONFIGURED)
    stored = {**spec.to_data(), "mcp": {"everything": {"command": "/bin/sh", "args": ["-c", "id"]}}}

    assert type(spec).model_validate(stored).mcp == ["everything"]


def test_settings_servers_that_are_down_still_let_workflows_name_their_tools():
    text = WORKFLOW.replace("everything", "remote")

    spec = parse_workflow(text, known_tools=["send_message", "remote__*"])

    assert spec.agents["caller"].tools == ["remote__echo"]
