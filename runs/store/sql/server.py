"""What the database server says of itself."""

from __future__ import annotations

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
