"""What every statement of the store runs on: the cursor, several
statements in order in one transaction. The general versions, for any
database Django speaks to; PostgreSQL's own (prepared statements,
pipelines) are in postgres.py. No caller asks whether a transaction is
open: only a dialect's own statements may differ by it (postgres.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.db import DEFAULT_DB_ALIAS, connections, transaction


class Statements:
    """The base of the store's topic classes (runs/store/sql/store.py)."""

    # The database's name, as Django's backends call it.
    name = ""
    # How step ``p``'s dependencies read (schedule.prefilter_pending_may_start): that
    # it depends on nothing; that its depends_on holds step ``s``'s step id.
    depends_on: tuple[str, str] = ("", "")
    # Step ``s``'s dependencies as the rows of one column (steps.prefilter_guess_holds).
    dependencies_of_s = ""

    def cursor(self):
        """A cursor for the store's fixed statements, on the connection
        rows.database() names (looked up here: every statement takes one)."""
        return connections[DEFAULT_DB_ALIAS].cursor()

    def can_pipeline(self) -> bool:
        """Whether a transaction can be sent in one round trip here
        (``in_one_round_trip``): never in general."""
        return False

    def in_one_round_trip(self, statements: Sequence[tuple[str, Mapping | Sequence]]) -> list[list[tuple]]:
        """Run ``statements`` as one transaction in one round trip
        (PostgreSQL, outside any transaction: postgres.py)."""
        raise RuntimeError("a pipeline of statements here needs PostgreSQL and no open transaction")

    def in_order(self, statements: Sequence[tuple[str, Mapping | Sequence]]) -> list[list[tuple]]:
        """Run ``statements`` (SQL, parameters) one after another in one
        transaction, the caller's (or, outside any, one of their own), and
        return each one's rows, in order (one round trip on PostgreSQL).
        Each statement starts when the one before it has finished, so a read
        after a lock sees what the lock's earlier holders committed."""
        results = []
        with transaction.atomic(savepoint=False), self.cursor() as cursor:
            for statement, params in statements:
                cursor.execute(statement, params)
                results.append(cursor.fetchall() if cursor.description else [])
        return results

    def fetch_all(self, statement: str, params: Mapping | Sequence) -> list[tuple]:
        """The rows of one statement."""
        with self.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall()

    def lease_free(self, alias: str, owner: str, now: str, grace: str) -> str:
        """The condition under which a claim takes a step's turn (the step's
        columns prefixed with ``alias``; the others placeholders, in this
        order; ``grace``'s parameter is ``lease_grace_params``'): no lease,
        the claimer's own, or one that ran out at ``now``. PostgreSQL adds
        that the server has been up a lease period (postgres.py)."""
        return f"({alias}lease_expires IS NULL OR {alias}lease_owner = {owner} OR ({alias}lease_expires < {now}))"

    def lease_grace_params(self) -> list:
        """The positional parameters of ``lease_free``'s ``grace``: none here."""
        return []

    def on_connection_created(self, sender, connection, **kwargs) -> None:
        """Set up a new connection (Django's ``connection_created``)."""
