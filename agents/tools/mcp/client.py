"""One live connection to an MCP server, usable from synchronous code.

The official SDK is async. Each connection gets its own event loop on a
thread (an anyio blocking portal): the transport and the ``ClientSession``
are entered there and stay open between calls, and a synchronous caller
(a Celery worker thread, a view) waits for one call at a time with
``portal.call``. A connection is never repaired: after a transport failure
the owner (``agents.tools.mcp.servers``) closes it and opens a fresh one.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO, TypeVar

import anyio
import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import StreamableHTTPError, streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    CallToolResult,
    Implementation,
    PaginatedRequestParams,
)
from mcp_types import Tool as RemoteTool

from agents.sandbox import SYSTEM_PATH, Sandbox, SandboxUnavailable
from agents.sandbox_cgroups import CallGroup, NoGroup
from agents.tools.mcp.config import McpServerConfig, address_refusal

log = logging.getLogger(__name__)
T = TypeVar("T")

CLIENT_INFO = Implementation(name="zenweb", version="1")
# How much of a stdio server's stderr is kept to explain why it stopped.
STDERR_TAIL_LINES = 20


class McpTransportError(Exception):
    """The connection broke (the process died, the pipe closed, the HTTP
    server answered 5xx or not at all): worth a retry on a fresh session."""


class McpStartError(Exception):
    """The server could not be started or did not complete the handshake."""


class McpCallTimeout(Exception):
    """A call took longer than its timeout; it was cancelled."""


class McpConnection:
    """A connected session with one server. ``open`` raises McpStartError;
    ``list_tools`` and ``call_tool`` raise McpTransportError, McpCallTimeout,
    or MCPError for a JSON-RPC error the server answered."""

    def __init__(self, config: McpServerConfig, sandbox: Sandbox | None = None) -> None:
        self.config = config
        self.sandbox = sandbox or Sandbox()
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._session: ClientSession | None = None
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.server_name = ""

    def open(self) -> None:
        try:
            # Variables are expanded here, so secrets live only in this connection.
            self._connect(self.config.expanded())
        except Exception as exc:
            reason = self._why(exc, stderr=True)
            self.close()
            if self.config.url is not None and reason == "Connection closed":
                # The HTTP transport swallows the cause; ask the URL directly.
                reason = self._probe() or reason
            raise McpStartError(reason) from None

    def _probe(self) -> str:
        try:
            config = self.config.expanded()
            httpx2.get(config.url or "", headers=config.headers, timeout=min(config.start_timeout, 5.0))
        except httpx2.HTTPError as exc:
            return self.config.redact(f"{type(exc).__name__} reaching {self.config.target()}: {exc}")
        except Exception:  # noqa: BLE001 - only an explanation is lost
            return ""
        return ""

    def _connect(self, config: McpServerConfig) -> None:
        # Each context manager is entered (and later exited) in a task of its
        # own on the portal's loop, as anyio's task groups require; the
        # ExitStack unwinds them in order.
        portal = self._portal = self._stack.enter_context(start_blocking_portal())
        if config.command is not None:
            # The server's own cgroup for as long as it lives: its memory and
            # processes together, never CPU seconds (it serves many calls).
            group = self.sandbox.call_group(cpu=False)
            self._stack.enter_context(group)
            argv, env = sandboxed_command(config, self.sandbox, group)
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=config.cwd)
            errlog = self._stderr_pipe()
            try:
                streams = self._stack.enter_context(
                    portal.wrap_async_context_manager(stdio_client(params, errlog=errlog))
                )
            finally:
                errlog.close()  # the child has its own copy; the reader sees EOF when it exits
        else:
            assert config.url is not None
            refusal = address_refusal(config.url)
            if refusal:
                raise McpStartError(refusal)
            http = create_mcp_http_client(
                headers=config.headers, timeout=httpx2.Timeout(config.start_timeout, read=config.timeout + 5)
            )
            self._stack.enter_context(portal.wrap_async_context_manager(http))
            streams = self._stack.enter_context(
                portal.wrap_async_context_manager(streamable_http_client(config.url, http_client=http))
            )
        session = self._stack.enter_context(
            portal.wrap_async_context_manager(ClientSession(*streams, client_info=CLIENT_INFO))
        )

        async def handshake() -> Any:
            with anyio.fail_after(config.start_timeout):
                return await session.initialize()

        result = portal.call(handshake)
        self._session = session
        info = result.server_info
        self.server_name = f"{info.name} {info.version}" if info else ""

    def list_tools(self) -> list[RemoteTool]:
        session = self._live()
        tools: list[RemoteTool] = []

        async def fetch() -> None:
            cursor = None
            with anyio.fail_after(self.config.timeout):
                for _ in range(100):  # a server that pages forever cannot hang us
                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break

        self._run(fetch)
        return tools

    def call_tool(self, name: str, arguments: dict[str, Any], timeout: float) -> CallToolResult:
        session = self._live()

        async def call() -> CallToolResult:
            with anyio.fail_after(timeout):
                return await session.call_tool(name, arguments)

        return self._run(call)

    def close(self) -> None:
        """Stop the session, the transport (a stdio server's process) and the loop."""
        self._session = None
        try:
            self._stack.close()
        except BaseException as exc:  # noqa: BLE001 - a dead server's transport often fails to close cleanly
            log.debug("MCP server %s: closing: %r", self.config.name, exc)
        self._portal = None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    def _live(self) -> ClientSession:
        if self._session is None or self._portal is None:
            raise McpTransportError("not connected")
        return self._session

    def _run(self, fn: Callable[[], Awaitable[T]]) -> T:
        assert self._portal is not None
        try:
            return self._portal.call(fn)
        except TimeoutError:
            raise McpCallTimeout() from None
        except MCPError as exc:
            if is_transient(exc):
                raise McpTransportError(self._why(exc)) from None
            raise
        except Exception as exc:
            if is_transient(exc):
                raise McpTransportError(self._why(exc)) from None
            raise

    def _stderr_pipe(self) -> TextIO:
        read_fd, write_fd = os.pipe()
        reader = os.fdopen(read_fd, encoding="utf-8", errors="replace")
        lines = self._stderr

        def drain() -> None:
            with reader:
                for line in reader:
                    lines.append(line.rstrip()[:500])

        threading.Thread(target=drain, name=f"mcp-{self.config.name}-stderr", daemon=True).start()
        return os.fdopen(write_fd, "w")

    def _why(self, exc: BaseException, *, stderr: bool = False) -> str:
        """A one-line reason; for a start, with the end of the server's stderr."""
        exc = _innermost(exc)
        if isinstance(exc, TimeoutError):
            reason = f"no answer within {self.config.start_timeout:g} s"
        elif isinstance(exc, FileNotFoundError):
            reason = f"command not found: {self.config.command}"
        elif isinstance(exc, SandboxUnavailable):
            reason = f"cannot start sandboxed: {exc}"
        elif isinstance(exc, httpx2.HTTPStatusError):
            reason = f"HTTP {exc.response.status_code} from {self.config.target()}"
        elif isinstance(exc, httpx2.HTTPError):
            reason = f"{type(exc).__name__} reaching {self.config.target()}: {exc}"
        else:
            reason = str(exc) or type(exc).__name__
        tail = self.stderr_tail().strip() if stderr else ""
        if tail:
            reason += f" (server stderr: {tail[-800:]})"
        return self.config.redact(reason)


def sandboxed_command(
    config: McpServerConfig, sandbox: Sandbox, group: CallGroup | NoGroup | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start a stdio server in the
    sandbox: only the variables its configuration names (and PATH, HOME,
    LANG), the system directories, its own program's files and its ``cwd``
    read-only, a private /tmp as its home, no network unless ``network``;
    in ``group``, its cgroup (``Sandbox.call_group``), if the host has them.
    Raises SandboxUnavailable, or FileNotFoundError for a missing command."""
    assert config.command is not None
    sandbox.require()
    found = shutil.which(config.command)
    if found is None:
        raise FileNotFoundError(config.command)
    # Run by its real path: only the real files are mounted, not the links to them.
    program = Path(found).resolve()
    env = {"PATH": SYSTEM_PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **config.env}
    readonly = [_program_files(program)]
    if config.cwd:
        readonly.append(Path(config.cwd).resolve())
    # A server lives as long as its connection: no CPU-time cap. Its memory
    # is capped by its cgroup where the host has them, never as address
    # space (a JavaScript runtime reserves gigabytes it never uses).
    limits = replace(sandbox.limits, cpu_seconds=0, memory_mb=0, network=config.network and sandbox.limits.network)
    argv = sandbox.with_limits(limits).command(
        [str(program), *config.args],
        env=env,
        readonly=[p for p in readonly if not _is_system(p)],
        cwd=Path(config.cwd).resolve() if config.cwd else Path("/tmp"),
        group=group,
    )
    return argv, env


def _program_files(program: Path) -> Path:
    """What a server's program needs to read: its whole ``node_modules``
    tree for an npm package (its dependencies live beside it), else its folder."""
    parts = program.parts
    if "node_modules" in parts:
        return Path(*parts[: parts.index("node_modules") + 1])
    return program.parent


def _is_system(path: Path) -> bool:
    return any(path.is_relative_to(root) for root in ("/usr", "/bin", "/sbin", "/lib", "/lib64"))


def is_transient(exc: BaseException) -> bool:
    """A failure of the connection rather than of the call: retry on a fresh session."""
    exc = _innermost(exc)
    if isinstance(exc, MCPError):
        # The HTTP transport's stand-ins for a 5xx and for a session the
        # server no longer knows (it restarted): a fresh session may succeed.
        return exc.code == CONNECTION_CLOSED or (exc.code, exc.message) in _HTTP_STAND_INS
    if isinstance(exc, httpx2.HTTPStatusError):
        return exc.response.status_code >= 500
    return isinstance(
        exc,
        (
            McpTransportError,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.EndOfStream,
            BrokenPipeError,
            ConnectionError,
            EOFError,
            httpx2.TransportError,
            StreamableHTTPError,
        ),
    )


_HTTP_STAND_INS = {(INTERNAL_ERROR, "Server returned an error response"), (INVALID_REQUEST, "Session terminated")}


def _innermost(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
