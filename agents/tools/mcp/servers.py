"""MCP servers as toolsets: one lazily started connection per configured
server per process, and each of its tools as a zenweb ``Tool``.

Naming: a tool's catalog id is ``mcp.<server>.<tool>`` (service ``mcp``,
toolset = the configured server name, the server's own tool name); the name
a model calls and a workflow lists under ``tools:`` and ``approvals:`` is
``<server>__<tool>`` (see ``agents.tools.mcp.schema.model_name``).

Failures: a call that outlives the server's ``timeout`` is a ``timeout``
ToolError; a broken connection (the process died, a closed pipe, HTTP 5xx)
is retried with backoff on a fresh session; if that keeps failing, or the
server cannot start, the call is an ``unavailable`` ToolError with the
reason. A server that failed to start is not tried again for
``RESTART_AFTER`` seconds, so a dead server does not slow every page.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from mcp_types import Tool as RemoteTool
from pydantic import ValidationError

from agents.sandbox import Sandbox
from agents.tools.base import Role, Tool, ToolContext, ToolError
from agents.tools.errors import FailureKind, RecoveryAction
from agents.tools.mcp.client import McpCallTimeout, McpConnection, McpStartError, McpTransportError
from agents.tools.mcp.config import McpServerConfig
from agents.tools.mcp.schema import JsonSchemaArgs, args_model, model_name, server_of
from agents.tools.results import MAX_ARTIFACT_BYTES, Artifact, ToolAnswer

log = logging.getLogger(__name__)

SERVICE = "mcp"
# Retries of a call whose connection broke, each on a fresh session, and the
# pause before each (seconds).
RETRY_DELAYS = (0.2, 1.0)
RESTART_AFTER = 30.0

Status = Literal["not started", "running", "failed"]


class McpUnavailable(Exception):
    """The server is not running and could not be started; the message says why."""


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server. ``remote_name`` is the server's name for it."""

    remote_name: str = ""
    title: str = ""

    @property
    def id(self) -> str:
        return f"{self.service}.{self.toolset}.{self.remote_name or self.name}"

    def catalog_entry(self) -> dict[str, Any]:
        return {**super().catalog_entry(), "title": self.title or self.remote_name or self.name}


class McpServer:
    """One configured server in this process: its connection (started on
    first use), its tool listing, its status and why it failed."""

    def __init__(self, config: McpServerConfig, sandbox: Sandbox | None = None) -> None:
        self.config = config
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._connection: McpConnection | None = None
        self._remote: list[RemoteTool] = []
        self._tools: list[McpTool] | None = None  # built from _remote once per connection
        self.status: Status = "not started"
        self.error = ""
        self.server_info = ""
        self._failed_at = 0.0

    @property
    def name(self) -> str:
        return self.config.name

    def tools(self) -> list[McpTool]:
        """This server's tools (its allow-list applied); starts it if needed.
        Raises McpUnavailable."""
        self._connect()
        with self._lock:
            if self._tools is None:
                allowed = self.config.tools
                names: list[str] = []
                self._tools = []
                for remote in self._remote:
                    if allowed is not None and remote.name not in allowed:
                        continue
                    tool = self._tool(remote, model_name(self.name, remote.name, names))
                    names.append(tool.name)
                    self._tools.append(tool)
            return list(self._tools)

    def call(self, remote_name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call one tool; raises ToolError (timeout, unavailable, or the server's refusal)."""
        last = ""
        for attempt in range(len(RETRY_DELAYS) + 1):
            connection = None
            try:
                connection = self._connect(force=attempt > 0)
                return connection.call_tool(remote_name, arguments, self.config.timeout)
            except McpCallTimeout:
                raise ToolError(
                    f"MCP server {self.name!r}: {remote_name} took longer than {self.config.timeout:g} s; stopped",
                    kind="timeout",
                    action="replan",
                ) from None
            except MCPError as exc:
                # The server answered with a JSON-RPC error: it refuses this call.
                kind: FailureKind = "invalid_call" if exc.code == INVALID_PARAMS else "domain_rejection"
                action: RecoveryAction = "correct_call" if exc.code == INVALID_PARAMS else "replan"
                message = self.config.redact(exc.message)
                raise ToolError(f"MCP server {self.name!r}: {message}", kind=kind, action=action) from None
            except McpTransportError as exc:
                last = str(exc)
                log.warning("MCP server %s: connection lost during %s (%s); reconnecting", self.name, remote_name, last)
                self._drop(connection)
            except McpUnavailable as exc:
                last = str(exc)
            if attempt < len(RETRY_DELAYS):
                time.sleep(RETRY_DELAYS[attempt])
        raise ToolError(f"MCP server {self.name!r} is unavailable: {last}", kind="unavailable", action="replan")

    def status_data(self) -> dict[str, Any]:
        """For the catalog page: never the expanded config (it may hold secrets)."""
        return {
            "name": self.name,
            "transport": self.config.transport,
            "target": self.config.target(),
            "status": self.status,
            "error": self.error,
            "server": self.server_info,
            "tools": len(self._remote),
        }

    def close(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
            if self.status == "running":
                self.status = "not started"
        if connection is not None:
            connection.close()

    def _connect(self, *, force: bool = False) -> McpConnection:
        with self._lock:
            if self._connection is not None:
                return self._connection
            if self.status == "failed" and not force and time.monotonic() - self._failed_at < RESTART_AFTER:
                raise McpUnavailable(self.error)
            connection = McpConnection(self.config, self.sandbox)
            try:
                connection.open()
                self._remote, self._tools = connection.list_tools(), None
            except (McpStartError, McpTransportError, McpCallTimeout, MCPError) as exc:
                connection.close()
                self.status, self.error = "failed", self.config.redact(_reason(exc))
                self._failed_at = time.monotonic()
                log.warning("MCP server %s could not start: %s", self.name, self.error)
                raise McpUnavailable(self.error) from None
            self._connection, self.status, self.error = connection, "running", ""
            self.server_info = connection.server_name
            return connection

    def _drop(self, connection: McpConnection | None) -> None:
        with self._lock:
            if connection is not None and self._connection is connection:
                self._connection = None
        if connection is not None:
            connection.close()

    def _tool(self, remote: RemoteTool, name: str) -> McpTool:
        read_only = bool(remote.annotations and remote.annotations.read_only_hint)
        # The coordinator gets read-only tools only, as with the builtins; a
        # tool that may change the world is journaled like files and shell.
        roles: frozenset[Role] = frozenset({"step", "coordinator"}) if read_only else frozenset({"step"})
        tags = ("mcp", "read-only") if read_only else ("mcp", "execution")
        description = (remote.description or remote.title or remote.name).strip()
        model = args_model(_camel(f"{self.name}_{remote.name}") + "Args", remote.input_schema)
        remote_name = remote.name

        def run(ctx: ToolContext, args: JsonSchemaArgs) -> ToolAnswer:
            return _result(self, remote_name, self.call(remote_name, args.model_dump()))

        return McpTool(
            name=name,
            description=f"{description[:1500]} (MCP server {self.name})",
            args_model=model,
            roles=roles,
            run=run,
            toolset=self.name,
            service=SERVICE,
            tags=tags,
            server_data=(("json", "evidence"),),
            remote_name=remote_name,
            title=remote.title or remote_name,
            # Our own per-call timeout fires first; the margin covers a reconnect.
            timeout=self.config.timeout + self.config.start_timeout + 5,
        )


def placeholder_tool(server: McpServer, name: str, reason: str) -> McpTool:
    """Stands in for ``name`` while its server is down (or does not list
    it): each call tries the server again and, once the tool is there,
    checks the arguments against its real schema and runs it."""

    def run(ctx: ToolContext, args: JsonSchemaArgs) -> ToolAnswer | str:
        try:
            tools = {tool.name: tool for tool in server.tools()}
        except McpUnavailable as exc:
            raise ToolError(f"MCP server {server.name!r} is unavailable: {exc}", kind="unavailable") from None
        tool = tools.get(name)
        if tool is None:
            offered = ", ".join(sorted(tools)) or "none"
            raise ToolError(
                f"MCP server {server.name!r} has no tool {name!r}; it offers: {offered}", kind="unavailable"
            )
        data = args.model_dump()
        try:
            checked = tool.args_model.model_validate(data)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors() if e["loc"]})
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
            raise ToolError(
                f"invalid arguments for {name}: {problems}", kind="invalid_call", action="correct_call", fields=fields
            ) from None
        return tool.run(ctx, checked)

    return McpTool(
        name=name,
        description=f"A tool of MCP server {server.name} (not reachable when this run started: {reason[:300]})",
        args_model=args_model("McpPendingArgs", {"type": "object"}),
        roles=frozenset({"step"}),
        run=run,
        toolset=server.name,
        service=SERVICE,
        tags=("mcp", "execution"),
        server_data=(("json", "evidence"),),
        remote_name=name.partition("__")[2],
    )


def tools_for_names(
    servers: Mapping[str, McpServerConfig], requested: Iterable[str], pool: McpServerPool | None = None
) -> list[McpTool]:
    """The MCP tools among ``requested`` model-facing names, from ``servers``.
    A name whose server is down, or that its server does not list, gets a
    placeholder whose calls fail ``unavailable`` saying why (or work once
    the server is back)."""
    pool = pool or POOL
    wanted: dict[str, list[str]] = {}
    for name in dict.fromkeys(requested):
        server_name = server_of(name)
        if server_name is not None and server_name in servers:
            wanted.setdefault(server_name, []).append(name)
    found: list[McpTool] = []
    for server_name, names in wanted.items():
        server = pool.server(servers[server_name])
        try:
            offered = {tool.name: tool for tool in server.tools()}
        except McpUnavailable as exc:
            found += [placeholder_tool(server, name, str(exc)) for name in names]
            continue
        for name in names:
            if name in offered:
                found.append(offered[name])
            else:
                log.warning("MCP server %s lists no tool %s", server_name, name)
                found.append(placeholder_tool(server, name, f"the server lists no tool {name!r}"))
    return found


class McpServerPool:
    """The servers this process has configured, keyed by configuration (two
    workflows declaring the same server share its connection)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[str, McpServer] = {}
        # How stdio servers start; the Django edge sets the operator's (runs/apps.py).
        self.sandbox: Sandbox | None = None

    def server(self, config: McpServerConfig) -> McpServer:
        with self._lock:
            key = config.fingerprint
            if key not in self._servers:
                self._servers[key] = McpServer(config, self.sandbox)
            return self._servers[key]

    def close_all(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.close()

    def _forget(self) -> None:
        # After fork the child has none of the parent's loop threads; its
        # connections are unusable, and closing them would stop the parent's servers.
        self._lock = threading.Lock()
        self._servers = {}


POOL = McpServerPool()
os.register_at_fork(after_in_child=POOL._forget)
atexit.register(POOL.close_all)


def _result(server: McpServer, remote_name: str, result: CallToolResult) -> ToolAnswer:
    texts = [_block_text(block) for block in result.content]
    text = "\n".join(line for line in texts if line is not None)
    if result.is_error:
        message = text.strip() or "the tool reported an error without a message"
        raise ToolError(f"MCP server {server.name!r}: {remote_name} failed: {message}", kind="domain_rejection")
    artifacts = []
    structured = result.structured_content
    if structured is not None:
        if len(json.dumps(structured, default=str)) <= MAX_ARTIFACT_BYTES:
            artifacts.append(Artifact("json", structured, title=f"{remote_name}: structured content"))
        if not text:
            text = json.dumps(structured, ensure_ascii=False, default=str)
    return ToolAnswer(text, artifacts=artifacts)


def _block_text(block: object) -> str | None:
    """What the model is told of one content block: text as it is, other
    media and resources by a line saying what they are."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {_size(block.data)} bytes: not shown to the model]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            return f"[resource {resource.uri} ({resource.mime_type or 'binary'}, {_size(resource.blob)} bytes)]"
        return f"[resource {resource.uri}]\n{resource.text}"
    if isinstance(block, ResourceLink):
        return f"[resource link {block.uri}{': ' + block.name if block.name else ''}]"
    return None


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, McpCallTimeout):
        return "listing its tools timed out"
    if isinstance(exc, MCPError):
        return f"listing its tools failed: {exc.message}"
    return str(exc) or type(exc).__name__


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
