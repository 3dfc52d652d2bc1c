"""/healthz and /readyz as a load balancer sees them, from a real daphne on a
PostgreSQL and a redis-server of the test's own: stopping either makes
/readyz a 503 naming it while /healthz stays 200, and /readyz is 200 again
once it is back."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.services import conftest as services

pytestmark = pytest.mark.services


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
    log = tmp_path / "daphne.log"
    with services.daphne(log, DATABASE_URL=own_postgres.url, REDIS_URL=own_redis.url) as base:
        yield base, log


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
