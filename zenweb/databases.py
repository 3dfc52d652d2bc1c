"""PostgreSQL connections per process: a bounded pool where requests are
served, one lasting connection per worker thread elsewhere.

Under ASGI each request's sync code runs in a thread of its own, so a
connection kept per thread (CONN_MAX_AGE) is left behind by every request
that runs at the same time as another: 50 concurrent requests leave 48
open, and bursts take the server to "too many clients". Django says persistent
connections should be disabled under ASGI; the web process borrows from
psycopg's pool instead (at most ``pool`` connections, a request past them
waits ``timeout`` seconds, then gets a 503: zenweb/overload.py). A Celery
worker process runs one task at a time on one thread: its lasting
connection is bounded by the process count and saves a connect per task.
"""

from __future__ import annotations

import sys
from pathlib import Path

# What a web process's connections are called in pg_stat_activity.
WEB_APPLICATION_NAME = "zenweb-web"


def serves_http(argv: list[str] | None = None) -> bool:
    """Whether this process serves HTTP: daphne (its script or ``python -m
    daphne``), ``manage.py serve``, or ``manage.py runserver`` (daphne's,
    as "daphne" is an installed app)."""
    argv = sys.argv if argv is None else argv
    if not argv:
        return False
    program = Path(argv[0])
    if program.name == "daphne" or (program.name == "__main__.py" and program.parent.name == "daphne"):
        return True
    return program.name == "manage.py" and argv[1:2] in (["serve"], ["runserver"])


def postgres(parsed: dict, *, web: bool, pool: int, timeout: float, prepare: bool) -> dict:
    """The ``default`` database for ``parsed`` (dj_database_url's dict,
    without conn_max_age): pooled in a web process, lasting elsewhere."""
    options = parsed.setdefault("OPTIONS", {})
    if prepare:
        # Django turns psycopg's prepared statements off (prepare_threshold
        # None), and then psycopg ignores even an explicit prepare=True. Any
        # number turns them back on for runs/store/sql/'s fixed statements,
        # which ask with prepare=True; the ORM's client-side cursors never
        # prepare. A pooled connection keeps its prepared statements.
        options["prepare_threshold"] = 5
    if web:
        parsed["CONN_MAX_AGE"] = 0  # a pool takes the connection back at each request's end
        # Django then has the pool check each connection it hands out (an
        # empty statement, well under a millisecond), so one the server ended
        # while it idled (a failover, an idle reaper, pg_terminate_backend)
        # is replaced rather than failing the request.
        parsed["CONN_HEALTH_CHECKS"] = True
        options.setdefault("application_name", WEB_APPLICATION_NAME)
        options["pool"] = {
            "min_size": 1,
            "max_size": pool,
            "timeout": timeout,
            "name": WEB_APPLICATION_NAME,
        }
    else:
        parsed["CONN_MAX_AGE"] = 60
    return parsed
