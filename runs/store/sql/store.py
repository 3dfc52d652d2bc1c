"""The store: every operation on the database the core applies its
decisions through, one method each, in the general form any database
Django speaks to can run. Its topic classes hold the methods and their
statements (one module per thing they touch); the dialect subclasses hold
only what must differ: PostgreSQL's prepared statements, pipelines,
RETURNING from joins and upserts (postgres.py, postgres_steps.py,
postgres_writes.py), SQLite's JSON functions (sqlite.py). A process
reaches its store through ``runs.store.sql.store()``.
"""

from __future__ import annotations

from runs.store.sql.call_writes import ToolCallWrites
from runs.store.sql.ends import EndStatements
from runs.store.sql.live import LiveReads
from runs.store.sql.messages import MessageStatements
from runs.store.sql.queued_turns import QueuedTurnStatements
from runs.store.sql.record_writes import RecordWrites
from runs.store.sql.run_claims import RunClaimStatements
from runs.store.sql.run_writes import RunWrites
from runs.store.sql.server import ServerStatements
from runs.store.sql.step_writes import StepWrites
from runs.store.sql.turns import TurnStatements
from runs.store.sql.workers import WorkerStatements


class Store(
    TurnStatements,
    RunClaimStatements,
    QueuedTurnStatements,
    MessageStatements,
    EndStatements,
    LiveReads,
    ServerStatements,
    WorkerStatements,
    StepWrites,
    RunWrites,
    ToolCallWrites,
    RecordWrites,
):
    """Every operation of the store (see the module's docstring)."""
