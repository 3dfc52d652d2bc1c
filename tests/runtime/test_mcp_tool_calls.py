"""MCP servers as toolsets, against the reference server-everything from npm
(over stdio and streamable HTTP): listing, calls, validation with retry
hints, isError, timeouts, a killed server, and the sandbox a stdio one runs in."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from agents.sandbox import Sandbox
from agents.tools import ToolRegistry
from agents.tools.mcp import McpServerConfig
from agents.tools.mcp.schema import args_model
from agents.tools.mcp.servers import McpServer, McpServerPool, McpUnavailable, tools_for_names
from tests.mcp.servers import EVERYTHING, everything_over_http, kill_stdio_servers, require_servers
from tests.runtime.mcp_calls import call, ctx

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("local_mcp_servers_allowed")]

KILL_MARKER = "zenweb-test-killable"


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
    assert hint["missing_fields"] == ["message"] and hint["action"] == "correct_call"
    assert json.loads(missing.text.split("retry_hint: ", 1)[1])["missing_fields"] == ["b"]


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
