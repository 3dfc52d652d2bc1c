"""What the measurements share: result rows with their targets, the
throwaway databases and environments, child processes and worker processes.

Persistent measurements run in a child process (``python -m bench.child``)
whose environment selects the database, exactly as zenweb's own processes
are configured: ZENWEB_DATA_DIR for SQLite, DATABASE_URL for PostgreSQL,
REDIS_URL for the Redis broker and channel layer. The child prints one
JSON line that the parent reads.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
JSON_MARK = "BENCH_JSON="

# The bench's own services: a database it creates and drops, and a Redis
# database other than the test suite's (15), so a concurrent `make test`
# never sees the bench's queues.
PG_URL = os.environ.get("ZENWEB_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/zenweb_bench")
REDIS_URL = os.environ.get("ZENWEB_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")

# Worker processes are started the way the Procfile starts them (prefork,
# 4 children each); ZENWEB_BENCH_WORKER_POOL=threads with
# ZENWEB_BENCH_WORKER_CONCURRENCY=8 measures a threads pool instead.
WORKER_POOL = os.environ.get("ZENWEB_BENCH_WORKER_POOL", "prefork")
WORKER_CONCURRENCY = int(os.environ.get("ZENWEB_BENCH_WORKER_CONCURRENCY", "4"))


@dataclass(frozen=True)
class Target:
    op: Literal[">=", "<=", "<"]
    value: float
    text: str

    def met(self, figure: float) -> bool:
        if self.op == ">=":
            return figure >= self.value
        if self.op == "<=":
            return figure <= self.value
        return figure < self.value


@dataclass
class Result:
    """One row of the table: several runs of one measurement on one backend."""

    measurement: str
    name: str
    backend: str
    unit: str
    values: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    target: Target | None = None
    note: str = ""
    skipped: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def best(self) -> float | None:
        if not self.values:
            return None
        return max(self.values) if self.higher_is_better else min(self.values)

    @property
    def met(self) -> bool | None:
        """Whether the median meets the target (None: no target, or not measured)."""
        if self.target is None or self.median is None:
            return None
        return self.target.met(self.median)

    def as_data(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {"median": self.median, "best": self.best, "met": self.met}
        return data


def skipped(measurement: str, name: str, backend: str, unit: str, reason: str, **kwargs: Any) -> Result:
    return Result(measurement, name, backend, unit, skipped=reason, **kwargs)


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu or platform.processor() or "unknown",
    }


# Services -------------------------------------------------------------------


def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used, or None when it can."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        psycopg.connect(_maintenance_url(PG_URL), connect_timeout=3).close()
    except Exception as exc:
        return f"PostgreSQL not reachable at {_without_password(PG_URL)}: {_short(exc)}"
    return None


def redis_problem() -> str | None:
    """Why Redis cannot be used, or None when it can."""
    try:
        import redis
    except ImportError:
        return "redis is not installed"
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as exc:
        return f"Redis not reachable at {REDIS_URL}: {_short(exc)}"
    return None


def _short(exc: Exception) -> str:
    """The gist of a connection error ("Connection refused"), not its paragraph."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.rstrip(".").rsplit(": ", 1)[-1].rsplit(". ", 1)[-1]


def _maintenance_url(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/postgres"


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{parts.username or ''}@{host}:{parts.port or 5432}{parts.path}"


def _database_name(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?", 1)[0]


def recreate_postgres_database() -> None:
    import psycopg

    name = _database_name(PG_URL)
    with psycopg.connect(_maintenance_url(PG_URL), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_postgres_database() -> None:
    import psycopg

    with psycopg.connect(_maintenance_url(PG_URL), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{_database_name(PG_URL)}" WITH (FORCE)')


def clear_redis_queues(*queues: str) -> None:
    """Empty the bench's queues (only those keys, never the whole database)."""
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.delete(*queues, "unacked", "unacked_index", "unacked_mutex")


# Environments ---------------------------------------------------------------


@dataclass
class Backend:
    """Where a persistent measurement runs: its label and its environment."""

    name: Literal["sqlite", "postgresql"]
    env: dict[str, str]
    redis: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}+redis" if self.redis else self.name


def base_env(data_dir: Path) -> dict[str, str]:
    """The environment of every child: a throwaway data dir, DEBUG off (as in
    production: no query log growing in memory), the scripted model, and no
    database or broker unless the backend adds one."""
    drop = {"DATABASE_URL", "REDIS_URL", "ZENWEB_TEST_DB", "ZENWEB_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    env = {name: value for name, value in os.environ.items() if name not in drop}
    data_dir.mkdir(parents=True, exist_ok=True)
    env |= {
        "DJANGO_SETTINGS_MODULE": "zenweb.settings",
        "ZENWEB_DATA_DIR": str(data_dir),
        "ZENWEB_WORKSPACES": str(data_dir / "workspaces"),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
        "ZENWEB_LOG_LEVEL": "WARNING",
        "ZENWEB_LLM": "scripted",
        "PYTHONPATH": str(ROOT),
    }
    return env


def sqlite_backend(tmp: Path) -> Backend:
    return Backend("sqlite", base_env(tmp / "sqlite"))


def postgres_backend(tmp: Path, *, redis: bool = False) -> Backend:
    env = base_env(tmp / ("postgresql-redis" if redis else "postgresql")) | {"DATABASE_URL": PG_URL}
    if redis:
        env["REDIS_URL"] = REDIS_URL
    return Backend("postgresql", env, redis=redis)


def migrate(backend: Backend) -> None:
    command = [PYTHON, "manage.py", "migrate", "--noinput", "-v0"]
    done = subprocess.run(command, cwd=ROOT, env=backend.env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise ChildError(f"migrate on {backend.name} failed:\n{_tail(done.stderr or done.stdout)}")


# Child processes ------------------------------------------------------------


class ChildError(RuntimeError):
    pass


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run_child(module: str, function: str, env: dict[str, str], timeout: float = 600, **kwargs: Any) -> Any:
    """Call ``module.function(**kwargs)`` in a fresh process with ``env``
    (Django set up for it) and return what it returned."""
    command = [PYTHON, "-m", "bench.child", module, function, json.dumps(kwargs)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(JSON_MARK):
            return json.loads(line[len(JSON_MARK) :])
    raise ChildError(f"{module}.{function} failed (exit {done.returncode}):\n{_tail(done.stderr or done.stdout)}")


@contextlib.contextmanager
def worker_processes(app: str, count: int, env: dict[str, str], logs: Path) -> Iterator[list]:
    """Start ``count`` `celery -A <app> worker` processes (as the Procfile
    does), wait until each is ready, stop them afterwards."""
    from zenweb.workers import WorkerOptions, WorkerStartError
    from zenweb.workers import worker_processes as start

    logs.mkdir(parents=True, exist_ok=True)
    hostnames = [f"bench{n}-{os.getpid()}@%h" for n in range(count)]
    files = [logs / f"{app.replace('.', '-')}-{n}.log" for n in range(count)]
    try:
        options = WorkerOptions(pool=WORKER_POOL, concurrency=WORKER_CONCURRENCY, ready_timeout=60)
        with start(app, hostnames, files, env=env, cwd=ROOT, options=options) as processes:
            yield processes
    except WorkerStartError as exc:
        raise ChildError(f"a worker of {app} did not start:\n{_tail(exc.log.read_text())}") from None


def emit_json(value: Any) -> None:
    sys.stdout.write(JSON_MARK + json.dumps(value) + "\n")
    sys.stdout.flush()


# The run's context ----------------------------------------------------------


@dataclass
class Context:
    """One `python -m bench`: its temp dir, how often to repeat, what services
    are there, and the databases already migrated."""

    tmp: Path
    repeats: int
    # Seconds of timed runs a slow measurement may spend before it stops
    # repeating (orchestration: one 500-step run can take most of a minute).
    budget: float = 60.0
    pg_problem: str | None = None
    redis_problem: str | None = None
    _migrated: set[str] = field(default_factory=set)

    def sqlite(self) -> Backend:
        backend = sqlite_backend(self.tmp)
        self._migrate_once("sqlite", backend)
        return backend

    def postgres(self, *, redis: bool = False) -> Backend:
        """The bench's PostgreSQL database (created and migrated on first use)."""
        assert self.pg_problem is None and not (redis and self.redis_problem)
        backend = postgres_backend(self.tmp, redis=redis)
        if "postgresql" not in self._migrated:
            recreate_postgres_database()
        self._migrate_once("postgresql", backend)
        return backend

    def with_redis(self) -> tuple[Backend, str]:
        """A backend with Redis as channel layer and broker, on PostgreSQL
        when it is there (SQLite otherwise), and its label."""
        if self.pg_problem:
            backend = self.sqlite()
            backend.env["REDIS_URL"] = REDIS_URL
            return backend, "sqlite+redis"
        return self.postgres(redis=True), "postgresql+redis"

    def settle(self) -> None:
        """Between measurements: VACUUM and ANALYZE the bench's PostgreSQL
        database, if one was made, so that autovacuum does not do it for
        what one measurement loaded while the next is timed. (On 2 cores,
        the dashboard's 50,000 events took the fan-out from 2.4x to 2.6x
        and 2.7x to 3.1x, its PostgreSQL CPU a step from 0.9 ms to 1.4 ms.)"""
        if "postgresql" not in self._migrated:
            return
        import psycopg

        try:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")
        except psycopg.Error as exc:
            # The next measurement says what is wrong with the database; this one's rows stand.
            print(f"   could not vacuum the bench's database: {_short(exc)}", flush=True)

    def _migrate_once(self, key: str, backend: Backend) -> None:
        if key not in self._migrated:
            migrate(backend)
            self._migrated.add(key)

    def cleanup(self) -> None:
        if "postgresql" in self._migrated:
            with contextlib.suppress(Exception):
                drop_postgres_database()


# Signs in a worker's log that the broker went away mid-run (another program
# restarting Redis, say): the figure then measures the outage, not zenweb.
TROUBLE = ("Connection to broker lost", "Connection refused", "Connection closed by server")


def log_trouble(directory: Path) -> str:
    """What went wrong in the logs under ``directory``, or an empty string."""
    for log in sorted(directory.glob("*.log")):
        text = log.read_text(errors="replace")
        for sign in TROUBLE:
            if sign in text:
                return f"{sign!r} in {log.name}; rerun for a clean figure"
    return ""


# How often a driver asks whether its run (or bare fan-out) is done: each
# ask costs CPU on the cores being measured (a query here, a Redis GET
# there), and the answer is late by half of it on average, 5 ms of runs that
# take 0.7 s and more. Both sides of a comparison ask as often.
POLL_SECONDS = 0.01


def wait_for_terminal(run_id: int, timeout: float, poll: float = POLL_SECONDS) -> str:
    """Poll a run (in a child with Django set up) until it ends; its status."""
    from django.db import connection

    from runs.models import Run

    deadline = time.monotonic() + timeout
    # Plain SQL: the ORM's query costs about 0.6 ms of this process's CPU
    # every 5 ms, on the cores the workers and PostgreSQL are measured on.
    query = f"SELECT status FROM {connection.ops.quote_name(Run._meta.db_table)} WHERE id = %s"
    while True:
        with connection.cursor() as cursor:
            cursor.execute(query, [run_id])
            (status,) = cursor.fetchone()
        if status in Run.TERMINAL:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still {status} after {timeout} s")
        time.sleep(poll)
