"""What the database server says of itself."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError
from django.db.migrations.executor import MigrationExecutor

from runs.store.sql.base import Statements
from runs.store.sql.errors import first_line
from runs.store.sql.rows import database


class ServerStatements(Statements):
    def database_up_for(self) -> float | None:
        """How many seconds the database server has been up (since it last
        started: after a crash, since it came back), by its own clock, which
        the workers' may not match; None for a database that is a file in
        this process (SQLite)."""
        return None

    def database_problem(self) -> str | None:
        """Why zenweb cannot start on its database (it cannot be reached, or its
        tables are not made yet), in a line that says what to do; None if it can.
        Names the database, never its password."""
        where = settings.DATABASES["default"]
        named = f"{self.name} database {where.get('NAME')!s}"
        if where.get("HOST"):
            named += f" at {where['HOST']}:{where.get('PORT') or 'its default port'}"
        try:
            self.connect_past_the_pool()
            database().ensure_connection()
            executor = MigrationExecutor(database())
            unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except DatabaseError as exc:
            return f"cannot use the {named}: {first_line(exc)} (DATABASE_URL)"
        if unapplied:
            return f"the {named} lacks {len(unapplied)} migrations: run `manage.py migrate` first"
        return None

    def release_while_waiting(self) -> None:
        """A web request that waits (a command's ``?wait=N``) gives its
        connection back between its reads, where a pool holds it
        (PostgreSQL's: postgres.py); a database that is a file in this
        process (SQLite) keeps it."""

    def connect_past_the_pool(self) -> None:
        """Open and close one connection of the web process's pool's kind
        without the pool (zenweb/databases.py), where there is one
        (PostgreSQL's: postgres.py)."""
