"""daphne's PostgreSQL connections stay bounded under bursts of requests
(issue 46.1): each request once left its thread's connection open, so 50
concurrent GETs left 48 behind and bursts took the server to "too many
clients" and 500s. On a PostgreSQL of the test's own with room for 25
connections, 200 API requests in bursts of 50 keep daphne at or under its
pool (ZENWEB_DB_POOL), answer no 500, and leave the server open to others;
a pool too small for the burst answers 503 with Retry-After."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.browser.harness import free_port, port_open
from tests.services.conftest import ROOT

pytestmark = pytest.mark.services

MAX_CONNECTIONS = 25
BURSTS, BURST = 4, 50


def manage(url: str, code: str) -> str:
    env = {**os.environ, "DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def small_postgres(own_postgres):
    """The test's own PostgreSQL, allowing only MAX_CONNECTIONS clients."""
    with psycopg.connect(own_postgres.url, autocommit=True) as db:
        db.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
    own_postgres.stop()
    own_postgres.start()
    return own_postgres


@pytest.fixture
def token(small_postgres) -> str:
    return manage(
        small_postgres.url,
        "from django.contrib.auth import get_user_model; from runs.api.auth import create_token; "
        "print(create_token(get_user_model().objects.create_user('burst'))[1])",
    )


class Daphne:
    def __init__(self, url: str, redis_url: str, log, **env: str) -> None:
        self.port = free_port()
        environment = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1", **env}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "zenweb.asgi:application"],
                cwd=ROOT,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while not port_open(self.port):
            assert self.process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def get(url: str, token: str) -> tuple[int, str | None]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            json.load(answer)
            return answer.status, None
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Retry-After")


def daphnes_connections(db: psycopg.Connection) -> int:
    """Connections to the test's database but ``db`` itself: daphne's, the
    only other client once the schema and the token are made."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    return db.execute(query).fetchone()[0]


class Watch:
    """Samples daphne's connections in pg_stat_activity, and opens a fresh
    connection of another client each time: the server must take it."""

    def __init__(self, url: str) -> None:
        self.url, self.most, self.refused = url, 0, []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as db:
                    self.most = max(self.most, daphnes_connections(db))
            except psycopg.OperationalError as exc:
                self.refused.append(str(exc))
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


def bursts(base: str, token: str) -> list[tuple[int, str | None]]:
    answers = []
    with ThreadPoolExecutor(BURST) as pool:
        for _ in range(BURSTS):
            answers += pool.map(lambda _: get(f"{base}/api/runs", token), range(BURST))
    return answers


def test_daphne_keeps_to_its_pool_through_bursts_and_the_server_stays_open(small_postgres, own_redis, token, tmp_path):
    pool = 4
    daphne = Daphne(small_postgres.url, own_redis.url, tmp_path / "daphne.log", ZENWEB_DB_POOL=str(pool))
    try:
        with Watch(small_postgres.url) as watch:
            answers = bursts(f"http://127.0.0.1:{daphne.port}", token)
            time.sleep(0.5)
        with psycopg.connect(small_postgres.url, autocommit=True) as db:
            after = daphnes_connections(db)
    finally:
        daphne.stop()

    assert len(answers) == BURSTS * BURST
    assert [status for status, _ in answers if status != 200] == []  # the pool's timeout was long enough to wait
    assert 1 <= watch.most <= pool and after <= pool
    assert watch.refused == []


def test_a_request_that_finds_no_connection_in_time_is_a_503_with_retry_after(
    small_postgres, own_redis, token, tmp_path
):
    # One connection and a tenth of a second to wait for it: most of a burst
    # of 50 cannot have it.
    log = tmp_path / "daphne.log"
    daphne = Daphne(small_postgres.url, own_redis.url, log, ZENWEB_DB_POOL="1", ZENWEB_DB_POOL_TIMEOUT="0.1")
    try:
        answers = bursts(f"http://127.0.0.1:{daphne.port}", token)
    finally:
        daphne.stop()

    statuses = {status for status, _ in answers}
    assert statuses <= {200, 503}, log.read_text()[-3000:]
    busy = [retry_after for status, retry_after in answers if status == 503]
    assert busy and set(busy) == {"5"}
