"""What the database server says of itself."""

from __future__ import annotations

from datetime import datetime

from runs.store.rows import database, plain_cursor


def database_started() -> datetime | None:
    """When the database server last started (PostgreSQL: after a crash,
    when it came back); None for SQLite, a file in this process."""
    if database().vendor != "postgresql":
        return None
    with plain_cursor() as cursor:
        cursor.execute("SELECT pg_postmaster_start_time()")
        return cursor.fetchone()[0]
