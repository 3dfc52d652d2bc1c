"""MCP servers as toolsets (see ``servers`` for naming and failures).

``config`` is plain pydantic and safe to import anywhere (the workflow
schema uses it); ``client`` and ``servers`` load the MCP SDK.
"""

from __future__ import annotations

from agents.tools.mcp.config import McpConfigError, McpServerConfig, load_server_configs, server_configs

__all__ = ["McpConfigError", "McpServerConfig", "load_server_configs", "server_configs"]
