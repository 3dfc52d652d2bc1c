"""The store: every raw SQL statement, each named, and the only place that
asks which database it runs on (dialect differences stay at the edge:
docs/architecture.md, "Layers").

``store()`` is the process's store, chosen once by the default
connection's database: a ``Store`` (store.py) whose methods are the
store's operations, in one subclass per database holding only what must
differ (``PostgresStore``, postgres*.py; ``SqliteStore``, sqlite.py).

Plain SQL where the ORM cannot say it (UPDATE ... RETURNING, a CTE that
locks the run first, JSON documents turned into rows, a pipelined
transaction) or took longer to build a query than the database to run it:
what runs on every step turn, routed message and event (about 1 ms a query
built by the ORM on a small VM, against 0.1-0.3 ms to run). Rows go in and
come out as the ORM would write and read them (rows.py).

Statements take keyword parameters (``%(run)s``, ``%(mailbox)s``...; a
value used twice is bound once) and return named tuples; ``writes``'
builders and the padded IN list of ``start_pending_steps`` stay
positional (their columns or lengths vary with the call).

Beneath them all: ``rows`` (rows mapped in and out as the ORM would),
``base`` (the cursor, statements in order), ``pg_text`` (no NUL sent to
PostgreSQL) and ``errors`` (a lost connection told from a bad statement).
The topic classes, by what their statements touch, each module importing
only those above it: ``server`` (the database server itself), ``runs``
(the run row: its lock, counters and wake requests), ``writes`` (UPDATE
and INSERT of any model's rows), ``ends`` (what a run that ends leaves
open), ``events``, ``mailboxes`` (unread mail: read, dropped, closed),
``messages`` (a turn's messages stored and counted), ``schedule`` (what
scheduling reads after a step ends), ``steps`` (a step loaded and claimed
for its turn, started), ``queued_turns`` (a run's next first turn that
waits queued, claimed), ``run_claims`` (a run's start, its coordinator's
wake), ``turns`` (a step's turn written), ``workers`` (heartbeats) and
``live`` (the live page's reads).
"""

from __future__ import annotations

import functools

from runs.store.sql.ends import EndStep, LeftOpen, RunEnd
from runs.store.sql.messages import Counted, Written
from runs.store.sql.postgres import PostgresStore
from runs.store.sql.rows import database
from runs.store.sql.run_claims import WakeRead, WakeStep
from runs.store.sql.schedule import ScheduleState, StepRow, step_row_of
from runs.store.sql.sqlite import SqliteStore
from runs.store.sql.steps import WORKFLOW_TEXT, Successor
from runs.store.sql.store import Store
from runs.store.sql.turns import LastTurn, LastTurnWritten, TurnSaved

_STORES: dict[str, type[Store]] = {"postgresql": PostgresStore, "sqlite": SqliteStore}


@functools.cache
def store() -> Store:
    """The store of this process's database (the default connection's)."""
    name = database().vendor
    if name not in _STORES:
        raise RuntimeError(f"zenweb stores its runs in PostgreSQL or SQLite, not {name} (DATABASE_URL)")
    return _STORES[name]()


__all__ = [
    "WORKFLOW_TEXT",
    "Counted",
    "EndStep",
    "LastTurn",
    "LastTurnWritten",
    "LeftOpen",
    "RunEnd",
    "ScheduleState",
    "StepRow",
    "Store",
    "Successor",
    "TurnSaved",
    "WakeRead",
    "WakeStep",
    "Written",
    "step_row_of",
    "store",
]
