"""A tool call's context and one call of an MCP server's tool through a
registry, for the MCP tests."""

from __future__ import annotations

import json

from agents.tools import ToolCallMeta, ToolContext, ToolRegistry
from agents.tools.mcp.servers import McpServer


def ctx(role: str = "step") -> ToolContext:
    return ToolContext(ToolCallMeta("1", "1/s", "s/1", "call-1"), "s", role, router=None, sink=None)  # type: ignore[arg-type]


def call(server: McpServer, tool: str, arguments: dict, role: str = "step"):
    tools = server.tools()
    return ToolRegistry(tools).call(ctx(role), f"{server.name}__{tool}", json.dumps(arguments), tools)
