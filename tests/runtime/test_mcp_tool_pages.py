"""An MCP server that lists its tools a page at a time: every page is read,
the cursor handed back as the server asked (an in-memory server of the mcp
package, no process)."""

import mcp_types as types
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_client_server_memory_streams

from agents.tools.mcp import McpServerConfig
from agents.tools.mcp.client import McpConnection


def test_it_lists_every_page_of_a_servers_tools(monkeypatch):
    pages = {None: (["a", "b"], "page-2"), "page-2": (["c"], None)}

    async def list_tools(ctx, params):
        names, next_cursor = pages[params.cursor if params else None]
        tools = [types.Tool(name=name, input_schema={"type": "object"}) for name in names]
        return types.ListToolsResult(tools=tools, next_cursor=next_cursor)

    server = Server("paged", on_list_tools=list_tools)

    def connect(self, config):
        portal = self._portal = self._stack.enter_context(start_blocking_portal())
        client, served = self._stack.enter_context(
            portal.wrap_async_context_manager(create_client_server_memory_streams())
        )
        portal.start_task_soon(server.run, *served, server.create_initialization_options())
        self._session = self._stack.enter_context(portal.wrap_async_context_manager(ClientSession(*client)))
        portal.call(self._session.initialize)

    monkeypatch.setattr(McpConnection, "_connect", connect)
    connection = McpConnection(McpServerConfig(name="paged", url="http://127.0.0.1:9/mcp"))
    connection.open()
    try:
        assert [tool.name for tool in connection.list_tools()] == ["a", "b", "c"]
    finally:
        connection.close()
