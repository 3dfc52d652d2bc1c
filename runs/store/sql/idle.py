"""A web request that waits (a command's `?wait=N`) gives its connection
back to the pool between its reads, so that waiting clients hold none;
inside a transaction (a test's, an atomic block) it keeps it."""

from __future__ import annotations

from runs.store.sql.rows import database


def release_while_waiting() -> None:
    """Close this thread's connection (back to the pool) unless a transaction holds it."""
    connection = database()
    if not connection.in_atomic_block:
        connection.close()
