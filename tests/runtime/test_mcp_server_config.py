"""MCP server configuration: read from the environment, checked, its
secrets kept out of errors, model-facing names, and servers that cannot
start or sit at a private address."""

from __future__ import annotations

import json

import pytest

from agents.tools import ToolRegistry
from agents.tools.mcp import McpConfigError, McpServerConfig, load_server_configs, server_configs
from agents.tools.mcp.schema import model_name
from agents.tools.mcp.servers import McpServer, McpServerPool, tools_for_names
from tests.runtime.mcp_calls import ctx

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("local_mcp_servers_allowed")]


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
