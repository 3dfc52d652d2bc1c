"""Django's PostgreSQL backend, with a transaction's BEGIN sent together
with its first statement instead of in a round trip of its own.

Under ``transaction.atomic()`` psycopg sends BEGIN before the block's first
statement and waits for its answer, in pipeline mode too (it syncs after
BEGIN so that the connection's transaction status, which the server reports
only at a sync, says "in a transaction" before the next statement asks).
On this machine a round trip is about 80 us, and a turn's transaction is
three or four of them: BEGIN was a fifth of what routing a message waited
for. Here, when a transaction's first statement goes out in pipeline mode
(runs/sql.py sends every one of its statements that way when it would open
a transaction), BEGIN is queued ahead of it with no sync, and the connection
remembers which pipeline carried it; that pipeline's own sync then brings
the server's "in a transaction" back before anything else is sent. The ORM's
statements are sent as Django sends them.

It overrides private methods of psycopg's connection (``_start_query``,
``_commit_gen``, ``_rollback_gen``), as psycopg 3.3 has them:
requirements.txt pins psycopg, and tests/integration/test_round_trips.py
fails if a new version changes them.
"""

from __future__ import annotations

import psycopg
from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus


class OneTripBeginConnection(psycopg.Connection):
    """A psycopg connection whose BEGIN travels with the statement after it
    when that statement is pipelined (see the module's docstring)."""

    # The pipeline that carried this connection's last BEGIN: inside it the
    # server has begun a transaction the connection's status cannot show yet.
    _began_in: object | None = None

    def _start_query(self):
        if self._pipeline is None or self._autocommit or self.pgconn.transaction_status != TransactionStatus.IDLE:
            return (yield from super()._start_query())
        if self._began_in is self._pipeline:
            return None
        yield from self._exec_command(self._get_tx_start_command())
        self._began_in = self._pipeline
        return None

    def _commit_gen(self):
        yield from self._settle()
        return (yield from super()._commit_gen())

    def _rollback_gen(self):
        yield from self._settle()
        return (yield from super()._rollback_gen())

    def _settle(self):
        """Before COMMIT or ROLLBACK in the pipeline that carried BEGIN, sync
        it: until then the status may still say no transaction is open, and
        psycopg would send neither. The next transaction begins anew."""
        if self._began_in is not None and self._began_in is self._pipeline:
            yield from self._pipeline._sync_gen()
        self._began_in = None


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        # psycopg takes no connection class at connect time; the subclass
        # adds methods and one attribute with a class default, nothing
        # psycopg's own __init__ would have to set.
        connection.__class__ = OneTripBeginConnection
        return connection
