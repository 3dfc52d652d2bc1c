"""/healthz and /readyz on the embedded default, and on a database that
cannot be reached (in a process of its own, whose settings name it). The
services test (tests/services/test_health.py) stops a real PostgreSQL and Redis
under daphne."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_both_answer_anyone_on_the_embedded_default():
    client = Client()  # not signed in: a load balancer never is
    healthz = client.get("/healthz")
    assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})
    readyz = client.get("/readyz")
    assert (readyz.status_code, readyz.json()) == (
        200,
        {"status": "ok", "checks": {"database": "ok", "broker": "in-process"}},
    )
    assert "no-cache" in readyz["Cache-Control"]
    assert client.head("/readyz").status_code == 200
    assert client.post("/healthz").status_code == 405


@override_settings(SECURE_SSL_REDIRECT=True)
def test_probes_over_plain_http_are_not_redirected_where_https_is_required():
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    assert client.get("/login/").status_code == 301


PROBE = """
import json, django
django.setup()
from django.test import Client
client = Client()
print(json.dumps({path: [r.status_code, r.json()] for path in ("/healthz", "/readyz") for r in [client.get(path)]}))
"""


def test_readyz_says_the_database_is_down_and_healthz_holds(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens once the socket is closed
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "zenweb.settings",
        "DATABASE_URL": f"postgres://zenweb@127.0.0.1:{closed}/zenweb",
        "ZENWEB_DATA_DIR": str(tmp_path),
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.splitlines()[-1])
    assert answers["/healthz"] == [200, {"status": "ok"}]
    down = {"status": "unavailable", "checks": {"database": "down", "broker": "in-process"}}
    assert answers["/readyz"] == [503, down]
    assert f"not ready: database: cannot use the postgresql database zenweb at 127.0.0.1:{closed}" in done.stderr
