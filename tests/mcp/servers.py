"""The reference MCP servers the tests run, from the npm registry (pinned in
tests/mcp/package-lock.json, installed into .mcp-servers/ by
scripts/install_mcp_servers.sh, which scripts/test.sh runs first)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / ".mcp-servers" / "node_modules" / ".bin" / "mcp-server-everything"


def require_servers() -> None:
    """Skip when the servers are not installed; under CI=true, fail instead."""
    if EVERYTHING.exists():
        return
    why = f"{EVERYTHING.relative_to(ROOT)} is missing: run scripts/install_mcp_servers.sh (needs npm)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"MCP reference servers not installed under CI: {why}")
    pytest.skip(why)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything in streamable-HTTP mode on a free port; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("server-everything streamableHttp did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


def kill_stdio_servers(marker: str) -> list[int]:
    """SIGKILL this process's child servers whose command line has ``marker``."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if ppid == str(os.getpid()) and marker in cmdline:
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
    return killed
