"""/healthz and /readyz as a load balancer sees them, from a real daphne on a
PostgreSQL and a redis-server of the test's own: stopping either makes
/readyz a 503 naming it while /healthz stays 200, and /readyz is 200 again
once it is back."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.services.conftest import ROOT

pytestmark = pytest.mark.services


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe(base: str, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(base + path, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def until(base: str, path: str, status: int) -> dict:
    """The probe's body once it answers ``status`` (generous: a lost
    connection is dropped and a new one made on the next request)."""
    deadline = time.monotonic() + 30
    while True:
        code, body = probe(base, path)
        if code == status:
            return body
        assert time.monotonic() < deadline, (code, body)
        time.sleep(0.2)


@pytest.fixture
def daphne(own_postgres, own_redis, tmp_path):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": own_postgres.url, "REDIS_URL": own_redis.url, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "daphne.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "zenweb.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_readyz_fails_while_the_database_or_redis_is_down_and_healthz_holds(daphne, own_postgres, own_redis):
    base, log = daphne
    assert probe(base, "/readyz") == (200, {"status": "ok", "checks": {"database": "ok", "broker": "ok"}})
    assert probe(base, "/healthz") == (200, {"status": "ok"})

    own_postgres.crash()
    down = until(base, "/readyz", 503)
    assert down == {"status": "unavailable", "checks": {"database": "down", "broker": "ok"}}
    assert probe(base, "/healthz") == (200, {"status": "ok"})
    assert "not ready: database: cannot use the postgresql database zenweb" in log.read_text()

    own_postgres.start()
    assert until(base, "/readyz", 200)["checks"] == {"database": "ok", "broker": "ok"}

    own_redis.stop()
    assert until(base, "/readyz", 503)["checks"] == {"database": "ok", "broker": "down"}
    assert probe(base, "/healthz") == (200, {"status": "ok"})
    own_redis.start()
    assert until(base, "/readyz", 200)["status"] == "ok"
