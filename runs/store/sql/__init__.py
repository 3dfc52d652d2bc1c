"""Every raw SQL statement of the store, each named, and the only place
that asks which database it runs on (dialect differences stay at the edge:
docs/architecture.md, "Layers").

Plain SQL where the ORM cannot say it (UPDATE ... RETURNING, a CTE that
locks the run first, JSON documents turned into rows, a pipelined
transaction) or took longer to build a query than the database to run it:
what runs on every step turn, routed message and event (about 1 ms a query
built by the ORM on a small VM, against 0.1-0.3 ms to run). Rows go in and
come out as the ORM would write and read them (runs/store/sql/rows.py).

Statements take keyword parameters (``%(run)s``, ``%(mailbox)s``...; a
value used twice is bound once) and return named tuples; ``writes``'
builders and the padded IN list of ``start_pending_steps`` stay
positional (their columns or lengths vary with the call).

Beneath them all: ``rows`` (rows mapped in and out as the ORM would, the
cursor, and the pipelines that send several statements in one round trip),
``pg_text`` (no NUL sent to PostgreSQL) and ``errors`` (a lost connection
told from a bad statement). By what the statements touch, each module
importing only those above it:
``server`` (the database server itself), ``runs`` (the run row: its lock, counters and wake requests), ``writes``
(UPDATE and INSERT of any model's rows), ``ends`` (what a run that ends
leaves open), ``events``, ``mailboxes`` (unread
mail: read, dropped, closed), ``messages`` (a turn's messages stored and
counted), ``schedule`` (what scheduling reads after a step ends), ``steps`` (a step
loaded and claimed for its turn, started), ``queued_turns`` (a run's next
first turn that waits queued, claimed), ``turns`` (a step's last turn
written) and ``live`` (the live page's reads).
The names the rest of the app uses are re-exported here.
"""

from runs.store.sql.ends import EndStep, LeftOpen, RunEnd, end_run, end_steps
from runs.store.sql.events import insert_events
from runs.store.sql.mailboxes import (
    close_mailbox,
    drop_unread,
    mailbox_state,
    mark_read,
    unread,
    unread_count,
    unread_count_of,
    unread_count_sql,
)
from runs.store.sql.messages import Counted, Written, insert_message, locked_counter, read_counter, write_held
from runs.store.sql.queued_turns import claim_queued_first_turn
from runs.store.sql.run_claims import WakeRead, WakeStep, claim_wake, count_wake, read_wake, start_run
from runs.store.sql.runs import bump_counter, can_pipeline, lock_run, lock_run_sql, request_wake
from runs.store.sql.schedule import (
    ScheduleState,
    StepRow,
    locked_schedule_state,
    schedule_state,
    schedule_state_of,
    step_row_of,
    step_rows,
)
from runs.store.sql.server import database_problem, database_up_for
from runs.store.sql.steps import (
    WORKFLOW_TEXT,
    Successor,
    claim_step,
    claim_step_for_turn,
    run_joins,
    start_and_claim_step,
    start_pending_steps,
    start_steps,
    step_for_turn,
)
from runs.store.sql.turns import LastTurnWritten, TurnSaved, save_turn, write_last_turn
from runs.store.sql.writes import insert, insert_many, update, update_returning

__all__ = [
    "WORKFLOW_TEXT",
    "Counted",
    "EndStep",
    "LastTurnWritten",
    "LeftOpen",
    "RunEnd",
    "ScheduleState",
    "StepRow",
    "Successor",
    "TurnSaved",
    "WakeRead",
    "WakeStep",
    "Written",
    "bump_counter",
    "can_pipeline",
    "claim_queued_first_turn",
    "claim_step",
    "claim_step_for_turn",
    "claim_wake",
    "close_mailbox",
    "count_wake",
    "database_problem",
    "database_up_for",
    "drop_unread",
    "end_run",
    "end_steps",
    "insert",
    "insert_events",
    "insert_many",
    "insert_message",
    "lock_run",
    "lock_run_sql",
    "locked_counter",
    "locked_schedule_state",
    "mailbox_state",
    "mark_read",
    "read_counter",
    "read_wake",
    "request_wake",
    "save_turn",
    "run_joins",
    "schedule_state",
    "schedule_state_of",
    "start_and_claim_step",
    "start_pending_steps",
    "start_run",
    "start_steps",
    "step_row_of",
    "step_rows",
    "step_for_turn",
    "unread",
    "unread_count",
    "unread_count_of",
    "unread_count_sql",
    "update",
    "update_returning",
    "write_held",
    "write_last_turn",
]
