"""MCP servers as toolsets, against the reference server-everything from npm
(over stdio and streamable HTTP): listing, calls, validation with retry
hints, isError, timeouts, a killed server, and servers that cannot start."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from agents.sandbox import Sandbox
from agents.spec import WorkflowValidationError, parse_workflow
from agents.tools import ToolCallMeta, ToolContext, ToolRegistry
from agents.tools.mcp import McpConfigError, McpServerConfig, load_server_configs, server_configs
from agents.tools.mcp.schema import args_model, model_name
from agents.tools.mcp.servers import McpServer, McpServerPool, McpUnavailable, tools_for_names
from tests.mcp.servers import EVERYTHING, everything_over_http, kill_stdio_servers, require_servers

pytestmark = pytest.mark.sandbox

KILL_MARKER = "zenweb-test-killable"


@pytest.fixture(autouse=True)
def _local_servers_allowed(monkeypatch):
    # The test servers listen on loopback, which an operator must allow.
    monkeypatch.setenv("ZENWEB_MCP_ALLOWED_ADDRESSES", "127.0.0.1")


@pytest.fixture(scope="module")
def stdio_server():
    require_servers()
    server = McpServer(McpServerConfig(name="everything", command=str(EVERYTHING), args=["stdio"]))
    yield server
    server.close()


@pytest.fixture(scope="module")
def http_server():
    require_servers()
    with everything_over_http() as url:
        server = McpServer(McpServerConfig(name="remote", url=url, headers={"X-Test": "${MCP_TEST_HEADER}"}))
        yield server
        server.close()


@pytest.fixture(params=["stdio", "http"])
def server(request, monkeypatch):
    monkeypatch.setenv("MCP_TEST_HEADER", "hello")
    return request.getfixturevalue(f"{request.param}_server")


def ctx(role: str = "step") -> ToolContext:
    return ToolContext(ToolCallMeta("1", "1/s", "s/1", "call-1"), "s", role, router=None, sink=None)  # type: ignore[arg-type]


def call(server: McpServer, tool: str, arguments: dict, role: str = "step"):
    tools = server.tools()
    return ToolRegistry(tools).call(ctx(role), f"{server.name}__{tool}", json.dumps(arguments), tools)


def test_it_lists_the_servers_tools_with_ids_and_schemas(stdio_server):
    tools = {tool.name: tool for tool in stdio_server.tools()}

    echo = tools["everything__echo"]
    assert echo.id == "mcp.everything.echo"
    assert (echo.service, echo.toolset) == ("mcp", "everything")
    assert echo.parameters() == {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Message to echo"}},
        "required": ["message"],
    }
    assert echo.schema()["function"]["name"] == "everything__echo"
    entry = echo.catalog_entry()
    assert (entry["id"], entry["title"]) == ("mcp.everything.echo", "Echo Tool")
    assert "everything__get-sum" in tools
    assert all(len(name) <= 64 and "." not in name for name in tools)


def test_it_calls_tools_over_stdio_and_http(server):
    echoed = call(server, "echo", {"message": "tides"})
    summed = call(server, "get-sum", {"a": 2, "b": 40})

    assert (echoed.ok, echoed.text) == (True, "Echo: tides")
    assert summed.ok and "is 42" in summed.text
    assert echoed.arguments == {"message": "tides"}


def test_it_gives_a_retry_hint_naming_the_field_at_fault(stdio_server):
    wrong_type = call(stdio_server, "echo", {"message": 3})
    missing = call(stdio_server, "get-sum", {"a": 1})

    assert (wrong_type.ok, wrong_type.error_kind) == (False, "invalid_call")
    assert "message: 3 is not of type 'string'" in wrong_type.text
    hint = json.loads(wrong_type.text.split("retry_hint: ", 1)[1])
    assert hint["fields"] == ["message"] and hint["action"] == "correct_call"
    assert json.loads(missing.text.split("retry_hint: ", 1)[1])["fields"] == ["b"]


def test_it_turns_an_is_error_result_into_a_failed_call(stdio_server):
    echo = next(t for t in stdio_server.tools() if t.remote_name == "echo")
    # Skip zenweb's own validation so the server itself rejects the call (isError).
    loose = dataclasses.replace(echo, args_model=args_model("Loose", {"type": "object"}))

    outcome = ToolRegistry([loose]).call(ctx(), loose.name, '{"message": 3}', [loose])

    assert (outcome.ok, outcome.error_kind) == (False, "domain_rejection")
    assert "echo failed: MCP error -32602" in outcome.text


def test_it_keeps_images_from_the_model_and_structured_content_as_an_artifact(stdio_server):
    image = call(stdio_server, "get-tiny-image", {})
    weather = call(stdio_server, "get-structured-content", {"location": "Chicago"})

    assert "[image image/png," in image.text and "iVBOR" not in image.text
    assert [a.kind for a in weather.artifacts] == ["json"]
    assert weather.artifacts[0].source_tool == "mcp.everything.get-structured-content"


def test_it_gives_the_coordinator_only_read_only_tools(stdio_server):
    outcome = call(stdio_server, "echo", {"message": "x"}, role="coordinator")

    assert outcome.ok  # echo is annotated read-only
    assert all("read-only" in t.tags or t.roles == {"step"} for t in stdio_server.tools())


def test_it_stops_a_call_past_its_timeout_and_goes_on():
    require_servers()
    server = McpServer(McpServerConfig(name="slow", command=str(EVERYTHING), args=["stdio"], timeout=0.5))
    try:
        started = time.monotonic()
        slow = call(server, "trigger-long-running-operation", {"duration": 5, "steps": 1})
        after = call(server, "echo", {"message": "still here"})
    finally:
        server.close()

    assert (slow.ok, slow.error_kind) == (False, "timeout")
    assert "took longer than 0.5 s" in slow.text
    assert time.monotonic() - started < 4
    assert after.text == "Echo: still here"


def test_it_retries_on_a_fresh_session_when_the_server_was_killed():
    require_servers()
    server = McpServer(McpServerConfig(name="killable", command=str(EVERYTHING), args=["stdio", KILL_MARKER]))
    try:
        assert call(server, "echo", {"message": "one"}).ok
        assert kill_stdio_servers(KILL_MARKER)
        time.sleep(0.1)

        again = call(server, "echo", {"message": "two"})
    finally:
        server.close()

    assert (again.ok, again.text) == (True, "Echo: two")
    assert server.status == "not started"  # closed above; it was running


def test_it_retries_on_a_fresh_session_when_the_http_server_restarted(monkeypatch):
    require_servers()
    with everything_over_http() as url:
        server = McpServer(McpServerConfig(name="restarts", url=url))
        assert call(server, "echo", {"message": "one"}).ok
    with everything_over_http() as other_url:
        # Same server, new process (a new port stands in for the same address).
        server.config = server.config.model_copy(update={"url": other_url})
        again = call(server, "echo", {"message": "two"})
        server.close()

    assert (again.ok, again.text) == (True, "Echo: two")


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"command": "/nonexistent/mcp-server"}, "command not found: /nonexistent/mcp-server"),
        ({"command": "node", "args": ["-e", "console.error('no API key'); process.exit(3)"]}, "no API key"),
        ({"url": "http://127.0.0.1:9/mcp"}, "ConnectError"),
    ],
)
def test_it_reports_a_server_that_cannot_start_as_unavailable(config, why):
    pool = McpServerPool()
    servers = {"broken": McpServerConfig(name="broken", **config)}

    [tool] = tools_for_names(servers, ["broken__anything"], pool)
    outcome = ToolRegistry([tool]).call(ctx(), "broken__anything", "{}", [tool])

    assert (outcome.ok, outcome.error_kind) == (False, "unavailable")
    assert "MCP server 'broken' is unavailable" in outcome.text and why in outcome.text
    [server] = pool._servers.values()
    assert server.status_data()["status"] == "failed" and why in server.status_data()["error"]


def test_it_keeps_a_secret_the_server_echoes_out_of_the_reason_it_could_not_start(monkeypatch):
    monkeypatch.setenv("ZENWEB_TEST_MCP_KEY", "sk-live-0123456789")
    script = "console.error('refused key ' + process.env.API_KEY); process.exit(3)"
    config = McpServerConfig(
        name="leaky", command="node", args=["-e", script], env={"API_KEY": "${ZENWEB_TEST_MCP_KEY}"}
    )
    pool = McpServerPool()

    [tool] = tools_for_names({"leaky": config}, ["leaky__anything"], pool)
    outcome = ToolRegistry([tool]).call(ctx(), "leaky__anything", "{}", [tool])

    assert "refused key ${ZENWEB_TEST_MCP_KEY}" in outcome.text
    [server] = pool._servers.values()
    assert "sk-live" not in outcome.text + server.status_data()["error"]


def test_it_puts_back_the_placeholders_of_the_values_it_substituted():
    config = McpServerConfig(
        name="api", url="https://example.test/mcp?key=${KEY}", headers={"X-Flag": "${FLAG}", "X-Org": "${ORG}"}
    )
    environ = {"KEY": "abcd-1234", "ORG": "abcd", "FLAG": "on", "OTHER": "not-used-here"}

    text = config.redact("401 for key abcd-1234 of org abcd (flag on, not-used-here)", environ)

    assert text == "401 for key ${KEY} of org ${ORG} (flag on, not-used-here)"


def test_it_tells_the_model_which_tools_a_server_offers_for_a_wrong_name(stdio_server):
    pool = McpServerPool()
    pool._servers[stdio_server.config.fingerprint] = stdio_server

    [tool] = tools_for_names({"everything": stdio_server.config}, ["everything__ech"], pool)
    outcome = ToolRegistry([tool]).call(ctx(), "everything__ech", "{}", [tool])

    assert (outcome.ok, outcome.error_kind) == (False, "unavailable")
    assert "has no tool 'everything__ech'; it offers: everything__echo" in outcome.text


def test_it_offers_only_the_allowed_tools():
    require_servers()
    server = McpServer(McpServerConfig(name="few", command=str(EVERYTHING), args=["stdio"], tools=["echo"]))
    try:
        assert [t.name for t in server.tools()] == ["few__echo"]
    finally:
        server.close()


def test_it_makes_model_facing_names_openai_accepts():
    long = model_name("srv", "x" * 100)

    assert model_name("srv", "files/read.v2") == "srv__files_read_v2"
    assert len(long) == 64 and long.startswith("srv__xxx")
    assert model_name("srv", "a.b", taken=["srv__a_b"]) != "srv__a_b"


def test_it_reads_servers_from_the_environment_and_expands_variables_only_on_connect(tmp_path):
    api_json = {"api": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}
    servers = load_server_configs({"ZENWEB_MCP_SERVERS": json.dumps(api_json)})
    path = tmp_path / "mcp.yaml"
    path.write_text("servers:\n  local: {command: node, args: [server.js], timeout: 5}\n")
    from_file = load_server_configs({"ZENWEB_MCP_SERVERS_FILE": str(path)})

    api = servers["api"]
    assert api.headers == {"Authorization": "Bearer ${TOKEN}"}
    assert api.expanded({"TOKEN": "s3cret"}).headers == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in json.dumps(McpServer(api).status_data())
    with pytest.raises(McpConfigError, match="environment variable TOKEN is not set"):
        api.expanded({})
    assert (from_file["local"].transport, from_file["local"].timeout) == ("stdio", 5)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"x": {"command": "a", "url": "http://b"}}, "exactly one of 'command' (stdio) or 'url'"),
        ({"x": {"args": ["a"]}}, "exactly one of"),
        ({"Bad Name": {"command": "a"}}, "string_pattern_mismatch"),
        ({"x": {"command": "a", "timeout": 0}}, "timeout"),
    ],
)
def test_it_refuses_bad_server_configs(data, message):
    with pytest.raises(McpConfigError) as caught:
        server_configs(data)

    assert message in str(caught.value) or "should match pattern" in str(caught.value)


WORKFLOW = """\
name: uses-mcp
mcp: [everything]
agents:
  caller:
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


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/mcp",
        "http://localhost:9/mcp",
        "http://[::1]:9/mcp",
        "http://10.1.2.3/mcp",
        "http://192.168.0.10/mcp",
        "http://169.254.169.254/latest",
        "http://[::ffff:127.0.0.1]:9/mcp",
        "http://0.0.0.0:9/mcp",
    ],
)
def test_it_refuses_an_mcp_url_that_resolves_to_a_private_address_unless_allowed(monkeypatch, url):
    monkeypatch.delenv("ZENWEB_MCP_ALLOWED_ADDRESSES")
    pool = McpServerPool()
    servers = {"inside": McpServerConfig(name="inside", url=url)}

    [tool] = tools_for_names(servers, ["inside__anything"], pool)
    outcome = ToolRegistry([tool]).call(ctx(), "inside__anything", "{}", [tool])

    assert (outcome.ok, outcome.error_kind) == (False, "unavailable")
    assert "a loopback, private or reserved address" in outcome.text
    assert "ZENWEB_MCP_ALLOWED_ADDRESSES" in outcome.text


def test_it_connects_to_a_private_address_the_operator_allowed():
    from agents.tools.mcp.config import address_refusal

    allowed = {"ZENWEB_MCP_ALLOWED_ADDRESSES": "10.0.0.0/8, localhost"}

    assert address_refusal("http://10.1.2.3/mcp", allowed) is None
    assert address_refusal("http://localhost:8080/mcp", allowed) is None
    assert "192.168.0.10" in (address_refusal("http://192.168.0.10/mcp", allowed) or "")
    assert address_refusal("https://93.184.215.14/mcp", {}) is None


def test_settings_servers_that_are_down_still_let_workflows_name_their_tools():
    text = WORKFLOW.replace("everything", "remote")

    spec = parse_workflow(text, known_tools=["send_message", "remote__*"])

    assert spec.agents["caller"].tools == ["remote__echo"]


def test_a_stdio_server_runs_sandboxed_with_only_its_configured_environment(monkeypatch):
    require_servers()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-mcp-0123456789")
    monkeypatch.setenv("MCP_TEST_REGION", "eu-west")
    config = McpServerConfig(
        name="envcheck", command=str(EVERYTHING), args=["stdio"], env={"REGION": "${MCP_TEST_REGION}"}
    )
    server = McpServer(config)
    try:
        outcome = call(server, "get-env", {})
    finally:
        server.close()

    assert outcome.ok, outcome.text
    env = json.loads(outcome.text)
    assert env == {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PWD": "/tmp",  # set by bubblewrap
        "REGION": "eu-west",
    }


def test_a_stdio_server_does_not_start_where_no_sandbox_can(tmp_path):
    require_servers()
    server = McpServer(
        McpServerConfig(name="nosandbox", command=str(EVERYTHING), args=["stdio"]), Sandbox(bwrap="/nonexistent/bwrap")
    )

    with pytest.raises(McpUnavailable, match=r"no sandbox can start: bubblewrap .*apt-get install bubblewrap"):
        server.tools()
