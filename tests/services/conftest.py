"""Fixtures for the services tests: PostgreSQL and Redis must be there (under
CI=true their absence fails the run), and real `celery -A zenweb worker`
processes run on the test database."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from agents import workspace_quota
from tests.browser.harness import free_port, port_open
from tests.services.throwaway_postgres import own_postgres  # noqa: F401 - a fixture: a PostgreSQL of the test's own
from tests.services.throwaway_redis import own_redis  # noqa: F401 - a fixture: a redis-server of the test's own

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def services_required():
    missing = [
        what
        for what, ok in (
            ("DATABASE_URL (PostgreSQL)", connection.vendor == "postgresql"),
            ("REDIS_URL", settings.REDIS_URL.startswith("redis://")),
        )
        if not ok
    ]
    if missing:
        message = f"services tests need {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def worker_env(tmp_path: Path, redis_url: str, **extra: str) -> dict[str, str]:
    """What the fault tests' workers run with: a broker of the test's own,
    workspaces in ``tmp_path``, a sweep every second; ``extra`` on top."""
    return {
        "REDIS_URL": redis_url,
        "ZENWEB_WORKSPACES": str(tmp_path / "workspaces"),
        "ZENWEB_SWEEP_SECONDS": "1",
        **extra,
    }


@contextlib.contextmanager
def workers(
    tmp_path: Path,
    *names: str,
    env: dict[str, str] | None = None,
    purge: bool = True,
    pool: str = "prefork",
    concurrency: int = 4,
    database_url: str | None = None,
    ready_timeout: float = 30,
):
    """Start one worker process per name on the test database, or on
    ``database_url`` (broker purged before and after unless told not to),
    wait until each is ready (at most ``ready_timeout`` seconds), yield their log files; ``workers.processes``
    holds the Popen objects."""
    from zenweb.celery import app
    from zenweb.workers import WorkerOptions, WorkerStartError, worker_processes

    env = {**os.environ, **(env or {})}
    if database_url is None:
        db = connection.settings_dict
        database_url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env["DATABASE_URL"] = database_url
    if purge:
        app.control.purge()  # tasks a killed earlier run may have left on the broker
    logs = [tmp_path / f"{name}.log" for name in names]
    hostnames = [f"{name}-{os.getpid()}@%h" for name in names]
    try:
        options = WorkerOptions(
            pool=pool, concurrency=concurrency, ready_timeout=ready_timeout, poll=0.2, stop_timeout=20
        )
        with worker_processes("zenweb", hostnames, logs, env=env, cwd=ROOT, options=options) as processes:
            workers.processes = processes
            yield logs
    except WorkerStartError as exc:
        pytest.fail(f"a worker did not start:\n{exc.log.read_text()}")
    finally:
        if purge:
            app.control.purge()


@pytest.fixture
def worker_process(tmp_path):
    with workers(tmp_path, "worker") as logs:
        yield logs[0]


@pytest.fixture
def two_workers(tmp_path):
    with workers(tmp_path, "routing-a", "routing-b") as logs:
        yield logs


@contextlib.contextmanager
def daphne(log: Path, **env: str) -> Iterator[str]:
    """A daphne serving zenweb on a free port, with ``env`` over this
    process's environment and its output in ``log``; its base URL, once it
    accepts connections. Stopped on the way out. Its workspaces are beside
    ``log`` (the workers' too, as ``worker_env`` makes them) unless ``env``
    says otherwise, never the checkout's var/, and unmounted at the end."""
    port = free_port()
    env = {"ZENWEB_WORKSPACES": str(log.parent / "workspaces"), **env}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "zenweb.asgi:application"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)
        for root in workspace_quota.mounted_in(Path(env["ZENWEB_WORKSPACES"])):
            workspace_quota.remove(root)
