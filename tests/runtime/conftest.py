"""Fixtures shared by the runtime tests' files: a run's workspace and a step
agent calling builtin tools in it, a local chat-completions server and no
ambient OpenAI settings, and loopback allowed for the MCP test servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_openai_server import FakeOpenAIServer
from tests.runtime.tool_agent import Agent
from tests.workspace_mounts import release_under


@pytest.fixture
def workspace(tmp_path) -> Iterator[Path]:
    path = tmp_path / "workspace"
    path.mkdir()
    yield path
    # A tool that wrote gave it its own file system (agents/workspace_quota.py).
    release_under(tmp_path)


@pytest.fixture
def step(workspace) -> Agent:
    return Agent(workspace)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def no_ambient_openai_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK and httpx2 read these from os.environ; a developer's proxy or real
    # OpenAI settings must not change where these tests send requests.
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_CUSTOM_HEADERS",
        "ZENWEB_LLM",
        "ZENWEB_MODEL",
        "ZENWEB_LLM_TIMEOUT",
        "ZENWEB_LLM_MAX_RETRIES",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def local_mcp_servers_allowed(monkeypatch):
    # The test servers listen on loopback, which an operator must allow.
    monkeypatch.setenv("ZENWEB_MCP_ALLOWED_ADDRESSES", "127.0.0.1")
