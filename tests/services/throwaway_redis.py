"""A redis-server of the test's own, on a free port, that a test may stop
and start (never the machine's Redis): workers get it as REDIS_URL, and the
test process's Celery app publishes to it while ``broker_at`` is active."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis


class ThrowawayRedis:
    def __init__(self, directory: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        # No persistence: a restart loses every queued task, as a Redis without a volume does.
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        command += ["--dir", str(self.directory)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait(answering=True)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()  # as a crash or a lost node: nothing saved, clients cut off
            self.process.wait(timeout=10)
            self.process = None
        self._wait(answering=False)

    def _wait(self, *, answering: bool) -> None:
        probe = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while _answers(probe) != answering:
            assert time.monotonic() < deadline, (
                f"redis-server on {self.port} did not {'start' if answering else 'stop'}"
            )
            time.sleep(0.05)


def _answers(probe: redis.Redis) -> bool:
    try:
        return bool(probe.ping())
    except redis.ConnectionError:
        return False


@pytest.fixture
def own_redis(tmp_path) -> Iterator[ThrowawayRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = ThrowawayRedis(tmp_path)
    server.start()
    try:
        with broker_at(server.url):
            yield server
    finally:
        server.stop()


@contextlib.contextmanager
def broker_at(url: str) -> Iterator[None]:
    """The test process's Celery app publishes to ``url`` (its pools built anew)."""
    from zenweb.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None
    try:
        yield
    finally:
        app.conf.broker_url = saved
        app._pool = None
        app.amqp._producer_pool = None
