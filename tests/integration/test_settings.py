"""Settings read from the environment, as a fresh process reads them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/zenweb", "REDIS_URL": "redis://127.0.0.1:6379/0"}


def debug_in(tmp_path: Path, **environ: str) -> str:
    """settings.DEBUG in a new process with ``environ`` and none of this one's Django or service settings."""
    drop = {"DJANGO_DEBUG", "DATABASE_URL", "REDIS_URL"}
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"ZENWEB_DATA_DIR": str(tmp_path)} | environ
    code = "from django.conf import settings; print(settings.DEBUG)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return result.stdout.strip()


def test_it_keeps_debug_off_unless_asked_for(tmp_path):
    assert debug_in(tmp_path) == "False"
    assert debug_in(tmp_path, **SERVICES) == "False"
    assert debug_in(tmp_path, DJANGO_DEBUG="1") == "True"
    assert debug_in(tmp_path, DJANGO_DEBUG="1", **SERVICES) == "True"


@pytest.mark.django_db
def test_it_serves_the_dashboards_static_files_with_debug_off(settings, owner):
    # pytest-django runs tests with DEBUG off already. The client's handler
    # builds its middleware, WhiteNoise's list of files included, as daphne's does.
    settings.DEBUG = False
    client = Client()
    client.force_login(owner)

    page = client.get("/").content.decode()
    files = re.findall(r'(?:src|href)="(/static/[^"]+)"', page)

    assert {"/static/css/zenweb.css", "/static/js/live.js", "/static/django_htmx/ext/hx-ws-2.min.js"} <= set(files)
    for path in [*files, "/static/admin/css/base.css"]:
        assert client.get(path).status_code == 200, path


def test_a_value_an_mcp_servers_config_uses_is_redacted_from_tool_results_whatever_its_name(tmp_path):
    # GH_PAT's name says nothing of a secret, but the operator put it in a
    # server's header: a server that echoes it (a 401 quoting the header)
    # must not hand it to the model, the events or the export.
    servers = '{"gh": {"url": "https://example.test/mcp", "headers": {"Authorization": "Bearer ${GH_PAT}"}}}'
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}} | {
        "ZENWEB_DATA_DIR": str(tmp_path),
        "ZENWEB_MCP_SERVERS": servers,
        "GH_PAT": "ghp_canary0123456789",
        "PLAIN_SETTING": "not-a-secret-value",
    }
    code = textwrap.dedent(
        """
        import django
        django.setup()
        from django.conf import settings
        from agents.tools import ToolRegistry
        from tests.runtime.mcp_calls import ctx
        from tests.integration.test_settings import echo_tool

        registry = ToolRegistry([echo_tool()], secrets=settings.ZENWEB_SECRET_VALUES)  # as tools_for builds it
        print(registry.call(ctx(), "echo", "{}", [echo_tool()]).text)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )

    assert result.stdout.strip() == "401: Bearer [redacted] refused; PLAIN_SETTING=not-a-secret-value"


def echo_tool():
    """A tool answering as a server that echoes its token does."""
    from pydantic import BaseModel, ConfigDict

    from agents.tools import Tool

    class Nothing(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def echo(ctx, args):
        return f"401: Bearer {os.environ['GH_PAT']} refused; PLAIN_SETTING={os.environ['PLAIN_SETTING']}"

    return Tool("echo", "Echo.", Nothing, frozenset({"step"}), echo, toolset="testing")
