"""The store on PostgreSQL: what differs from the general one
(runs/store/sql/store.py). Every statement binds its parameters on the
server and is prepared on its first use on a connection; a transaction of
several statements goes in one round trip (a pipeline); the operations
that RETURNING from a join, an UPDATE in a WITH, SKIP LOCKED or an upsert
make one statement are in postgres_steps.py and postgres_writes.py; rows
go in as one JSON document; time is the server's clock."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence

from django.db import transaction

from runs.store.sql import pg_text
from runs.store.sql.ends import LeftOpen, RunEnd, end_run_params, end_run_sql
from runs.store.sql.postgres_runs import PostgresRuns
from runs.store.sql.postgres_writes import PostgresWrites
from runs.store.sql.rows import database
from runs.store.sql.steps import lease_grace
from runs.store.sql.workers import Beat, beat_sql, beats_sql


class PostgresStore(PostgresRuns, PostgresWrites):
    name = "postgresql"
    depends_on = ("p.depends_on = '[]'::jsonb", "p.depends_on ? s.step_id")
    dependencies_of_s = "SELECT jsonb_array_elements_text(s.depends_on)"

    def cursor(self):
        """A cursor for the store's fixed statements, run per routed message,
        event and step turn: it binds parameters on the server and prepares
        each statement on its first use on a connection: planned once, not
        every time (about a third off each). Django's own queries keep
        client-side binding and no preparing (some ORM queries need the one,
        connection poolers the other: see README on PgBouncer)."""
        db = database()
        db.ensure_connection()
        db.validate_thread_sharing()
        cursor = _prepared_cursor_class()(db.connection)
        return db.make_debug_cursor(cursor) if db.queries_logged else db.make_cursor(cursor)

    def can_pipeline(self) -> bool:
        """Outside any transaction: ``in_one_round_trip`` begins and commits its own."""
        return self.outside_transaction()

    def in_one_round_trip(self, statements: Sequence[tuple[str, Mapping | Sequence]]) -> list[list[tuple]]:
        """Run ``statements`` (SQL, parameters) as one transaction in one round
        trip, in PostgreSQL's pipeline mode (psycopg's public ``pipeline()``):
        no statement waits for the one before it to come back, and the commit
        goes with them. Each statement returns rows (a SELECT, or RETURNING),
        and each one's rows come back, in order (``rows.first`` takes the one
        row of a statement that returns at most one). Each statement sees what
        committed before it started, and what those before it wrote.

        One round trip is not one message: psycopg sends each statement as it
        is executed here, after binding its parameters. A lock the first takes
        is held while this process binds and sends the rest, longer if it loses
        the CPU meanwhile (pg_stat_activity shows the holder in ClientRead).
        Sent as one message of client-bound statements (psycopg's ClientCursor),
        the server would plan them every time, which makes a chain's step slower.

        Outside any transaction.atomic() block only: it begins and commits its
        own transaction."""
        if not self.can_pipeline():
            raise RuntimeError("a pipeline of statements here needs PostgreSQL and no open transaction")
        # No BEGIN or COMMIT: in autocommit, the statements a pipeline sends
        # before its Sync are one implicit transaction, committed at the Sync
        # (rolled back, and raised here, if one fails). psycopg's transaction()
        # would sync after BEGIN and again before COMMIT: three round trips.
        return _pipelined(statements)

    def in_order(self, statements: Sequence[tuple[str, Mapping | Sequence]]) -> list[list[tuple]]:
        """The general ``in_order`` in one round trip: a pipeline, as
        in_one_round_trip, which commits nothing here (the transaction goes on)."""
        with transaction.atomic(savepoint=False):
            return _pipelined(statements)

    def lease_free(self, alias: str, owner: str, now: str, grace: str) -> str:
        """The general condition, but a lease that ran out is taken only once
        the server has been up ``grace`` seconds (a lease period): no worker
        could renew a lease while the server was down, and one that lived
        through the outage gets that long to renew its own (a redelivered
        task would otherwise take its turn a second time). The sweeper's
        leases_lapse waits that long from its own reaching the server again
        too; a claim, made by a task a broker delivered, has no such past."""
        ran_out = (
            f"{alias}lease_expires < {now} AND now() - pg_postmaster_start_time() >= {grace} * interval '1 second'"
        )
        return f"({alias}lease_expires IS NULL OR {alias}lease_owner = {owner} OR ({ran_out}))"

    def lease_grace_params(self) -> list:
        return [lease_grace()]

    def on_connection_created(self, sender, connection, **kwargs) -> None:
        """No NUL reaches PostgreSQL (pg_text.py)."""
        pg_text.register(connection.connection)

    def end_run(self, run_id: int, end: RunEnd) -> LeftOpen:
        """One statement: both UPDATEs in a WITH."""
        with self.cursor() as cursor:
            cursor.execute(end_run_sql(), end_run_params(run_id, end))
            return LeftOpen(*(bool(flag) for flag in cursor.fetchone()))

    def beat(self, name: str, machine: str) -> None:
        """Stamped by the database's clock: workers on many machines are
        compared by one clock, not by their own, which may disagree by more
        than a beat."""
        with self.cursor() as cursor:
            cursor.execute(beat_sql(), {"name": name, "machine": machine})

    def beats(self) -> list[Beat]:
        return [Beat(*row) for row in self.fetch_all(beats_sql(), {})]

    def release_while_waiting(self) -> None:
        """The connection given back (to the web process's pool) between a
        waiting request's reads, so that waiting clients hold none; inside a
        transaction (a test's, an atomic block) it is kept."""
        if self.outside_transaction():
            database().close()

    def database_up_for(self) -> float | None:
        return self.fetch_all("SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8", {})[0][0]

    def connect_past_the_pool(self) -> None:
        """Through the pool a server that cannot be reached shows only after
        its timeout, as "couldn't get a connection", with the reason in the
        pool's log lines. No pool: nothing."""
        db = database()
        if "pool" not in db.settings_dict.get("OPTIONS", {}):
            return
        import psycopg

        params = {name: value for name, value in db.get_connection_params().items() if name != "cursor_factory"}
        with db.wrap_database_errors:
            psycopg.connect(**params).close()


@functools.cache
def _prepared_cursor_class():
    import psycopg

    class PreparedCursor(psycopg.Cursor):
        """psycopg's server-binding cursor, each statement prepared on its
        first use on a connection (psycopg's public ``prepare=True``)."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=True, binary=binary)

    return PreparedCursor


def _pipelined(statements: Sequence[tuple[str, Mapping | Sequence]]) -> list[list[tuple]]:
    db = database()
    db.ensure_connection()
    db.validate_thread_sharing()
    cursor_class = _prepared_cursor_class()
    cursors = [db.make_cursor(cursor_class(db.connection)) for _ in statements]
    started = time.monotonic()
    with db.wrap_database_errors, db.connection.pipeline():
        for cursor, (statement, params) in zip(cursors, statements, strict=True):
            cursor.execute(statement, params)
    if db.queries_logged:
        # Django's debug cursor cannot read a pipelined statement back: log
        # each one's text (with its placeholders) and their time together.
        spent = f"{time.monotonic() - started:.3f}"
        db.queries_log.extend({"sql": statement, "time": spent} for statement, _ in statements)
    return [cursor.fetchall() for cursor in cursors]
