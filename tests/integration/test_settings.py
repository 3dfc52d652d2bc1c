"""Settings read from the environment, as a fresh process reads them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
