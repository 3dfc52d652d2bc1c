"""What the database server says of itself."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError
from django.db.migrations.executor import MigrationExecutor

from runs.store.sql.errors import first_line
from runs.store.sql.rows import database, plain_cursor


def database_up_for() -> float | None:
    """How many seconds the database server has been up (since it last
    started: after a crash, since it came back), by its own clock, which
    the workers' may not match; None for SQLite, a file in this process."""
    if database().vendor != "postgresql":
        return None
    with plain_cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8")
        return cursor.fetchone()[0]


def database_problem() -> str | None:
    """Why zenweb cannot start on its database (it cannot be reached, or its
    tables are not made yet), in a line that says what to do; None if it can.
    Names the database, never its password."""
    where = settings.DATABASES["default"]
    named = f"{database().vendor} database {where.get('NAME')!s}"
    if where.get("HOST"):
        named += f" at {where['HOST']}:{where.get('PORT') or 'its default port'}"
    try:
        _connect_past_the_pool()
        database().ensure_connection()
        executor = MigrationExecutor(database())
        unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return f"cannot use the {named}: {first_line(exc)} (DATABASE_URL)"
    if unapplied:
        return f"the {named} lacks {len(unapplied)} migrations: run `manage.py migrate` first"
    return None


def _connect_past_the_pool() -> None:
    """Open and close one connection of the web process's pool's kind
    without the pool (zenweb/databases.py): through the pool a server that
    cannot be reached shows only after its timeout, as "couldn't get a
    connection", with the reason in the pool's log lines. No pool: nothing."""
    db = database()
    if db.vendor != "postgresql" or "pool" not in db.settings_dict.get("OPTIONS", {}):
        return
    import psycopg

    params = {name: value for name, value in db.get_connection_params().items() if name != "cursor_factory"}
    with db.wrap_database_errors:
        psycopg.connect(**params).close()
