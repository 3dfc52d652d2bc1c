"""Django implementations of the runtime's protocols, for one run.

Both expect to be called inside a transaction (runs/actions.py opens it):
a message and the event that records it commit together or not at all.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import threading
from datetime import timedelta

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason, MailboxState, MessageType, RouterMessage
from runs.channel_layers import InMemoryChannelLayer
from runs.models import Event, Message, Run, Step, Workflow
from runs.pg_text import json_text
from runs.sql import from_db, insert, lock_run, plain_cursor, row_values, table

log = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


_COUNTERS = {"last_event_seq", "last_message_no"}


def _bump(run_id: int, counter: str) -> int:
    # The UPDATE locks the run row until commit, so two writers never get the
    # same number, and a rolled-back transaction gives its number back.
    # RETURNING (PostgreSQL, SQLite >= 3.35) saves a second round trip.
    if counter not in _COUNTERS:
        raise ValueError(f"not a run counter: {counter!r}")
    table = connection.ops.quote_name(Run._meta.db_table)
    column = connection.ops.quote_name(counter)
    with plain_cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} + 1 WHERE id = %s RETURNING {column}", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return row[0]


def broadcast(run_id: int, seq: int) -> None:
    """Tell open dashboards that event ``seq`` exists. Only the number travels:
    consumers read the event itself from the database, so a lost notification
    costs a little latency, never an event."""
    send_to_dashboards(run_id, {"type": "run.event", "seq": seq}, f"event {seq}")


def send_to_dashboards(run_id: int, message: dict, what: str) -> None:
    """Send ``message`` to the run's group (its open pages), without waiting;
    ``what`` names it in the warning logged if it cannot be sent."""
    group = run_group(run_id)
    layer = get_channel_layer()
    if layer is None or (isinstance(layer, InMemoryChannelLayer) and not layer.listening(group)):
        # Nobody to tell: a dashboard that opens later reads every event
        # from the database once it has joined the group (runs/consumers.py).
        return
    try:
        if _in_sync_to_async_thread():
            # Back to the loop that runs this thread, as async_to_sync does.
            async_to_sync(layer.group_send)(group, message)
        else:
            sent = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), _broadcast_loop())
            # Not waited for (about 1 ms a commit): the loop publishes in
            # order, and a failure costs only latency, which the poll bounds.
            _in_flight.add(sent)
            sent.add_done_callback(functools.partial(_log_failed_broadcast, run_id, what))
    except Exception as exc:  # noqa: BLE001 - Redis away: the consumers' poll still finds the event
        log.warning("could not notify dashboards of %s of run %s: %s", what, run_id, exc)


def _log_failed_broadcast(run_id: int, what: str, sent) -> None:
    _in_flight.discard(sent)
    if not sent.cancelled() and sent.exception() is not None:
        log.warning("could not notify dashboards of %s of run %s: %s", what, run_id, sent.exception())


# Broadcasts not yet published. A process that exits right after a commit
# (a management command, a benchmark's writer) publishes them first, or its
# last events would reach the dashboards only at their next poll.
_in_flight: set[concurrent.futures.Future] = set()
FLUSH_SECONDS = 2.0


@atexit.register
def _flush_broadcasts() -> None:
    if _in_flight:
        concurrent.futures.wait(list(_in_flight), timeout=FLUSH_SECONDS)


_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_loop_lock = threading.Lock()


def _broadcast_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for broadcasts, in a thread of its own.

    async_to_sync outside an event loop starts a thread and a new loop for
    every call (about 2 ms here), and channels_redis, whose connections
    belong to a loop, connects again each time; one loop that lives on
    keeps both. A forked child (prefork workers) starts its own."""
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="zenweb-broadcast", daemon=True).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def _in_sync_to_async_thread() -> bool:
    """True in a thread that sync_to_async runs for an event loop (a view
    under daphne, a consumer's database helper): the in-memory channel layer
    must then be used from that loop."""
    return getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()


class DjangoEventSink:
    """Writes each event as it is emitted, inside the caller's transaction.
    A turn's events go through its unit of work's sink instead
    (runs/store/unit_of_work.py), which writes them together."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

    def emit(self, event: RuntimeEvent) -> None:
        # No savepoint: an event that cannot be written fails its transaction.
        with transaction.atomic(savepoint=False):
            seq = insert_events(self.run_id, [(event, timezone.now())])[-1]
            broadcast_after_commit(self.run_id, seq)


# The newest seq this thread wrote per run, not yet broadcast. A turn writes
# several events in one transaction; after it commits, the first of its
# callbacks broadcasts the newest seq and the others find nothing to do:
# one notification per run per commit. An entry left by a rolled-back
# transaction is overwritten by the next event of that run (a seq is only
# a hint: consumers read whatever is in the database after their cursor).
_unsent = threading.local()


def broadcast_after_commit(run_id: int, seq: int) -> None:
    pending: dict[int, int] = _unsent.__dict__.setdefault("seqs", {})
    pending[run_id] = seq

    def send() -> None:
        newest = pending.pop(run_id, None)
        if newest is not None:
            broadcast(run_id, newest)

    transaction.on_commit(send)


def insert_events(run_id: int, events: list[tuple[RuntimeEvent, object]]) -> list[int]:
    """Number ``events`` (each with its creation time) with the run's next
    seqs and store them, in order; return their seqs."""
    if connection.vendor != "postgresql":
        seqs = []
        for values in _event_rows(run_id, events):
            seqs.append(_bump(run_id, "last_event_seq"))
            insert(Event, seq=seqs[-1], **values)
        return seqs
    # One round trip for them all: the counter's UPDATE (which locks the run
    # row, as _bump does) numbers the rows.
    count = len(events)
    with plain_cursor() as cursor:
        cursor.execute(_insert_events_sql(), [count, run_id, run_id, count, events_document(events)])
        seqs = sorted(seq for (seq,) in cursor.fetchall())
    if len(seqs) != count:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return seqs


def _event_rows(run_id: int, events: list[tuple[RuntimeEvent, object]]) -> list[dict]:
    return [
        {"run": run_id, "type": event.type, "step_id": event.step_id, "data": event.data, "created": created}
        for event, created in events
    ]


def events_document(events: list[tuple[RuntimeEvent, object]]) -> str:
    """The last parameter of ``insert_events_from``: ``events`` (each with
    its creation time) as one JSON document, in order (PostgreSQL)."""
    return json_text(
        [
            {"type": event.type, "step_id": event.step_id, "data": event.data, "created": created.isoformat()}
            for event, created in events
        ]
    )


# An event row's columns and how insert_events_from fills each.
_EVENT_COLUMNS = {"run": "%s", "type": "e.type", "step_id": "e.step_id", "data": "e.data", "created": "e.created"}


@functools.cache
def insert_events_from(counter: str) -> str:
    """An INSERT of events numbered after ``counter``.last_event_seq (a CTE
    that added their count to the run's counter and returned it), from one
    JSON document that jsonb_to_recordset turns into rows (PostgreSQL: psycopg
    dumped a typed array per column about four times slower); parameters:
    the run's id, the count, then ``events_document``."""
    fields = [f.name for f in Event._meta.concrete_fields if not f.primary_key and f.name != "seq"]
    if fields != list(_EVENT_COLUMNS):
        raise RuntimeError(f"runs/stores.py writes events as {list(_EVENT_COLUMNS)}; the model has {fields}")
    quote = connection.ops.quote_name
    columns = ", ".join(quote(Event._meta.get_field(name).column) for name in _EVENT_COLUMNS)
    seq = quote(Event._meta.get_field("seq").column)
    return (
        f"INSERT INTO {table(Event)} ({columns}, {seq}) "
        f"SELECT {', '.join(_EVENT_COLUMNS.values())}, {counter}.last_event_seq - %s + e.n "
        f"FROM {counter}, ROWS FROM (jsonb_to_recordset(%s::jsonb) "
        "AS (type text, step_id text, data jsonb, created timestamptz)) WITH ORDINALITY "
        f"AS e(type, step_id, data, created, n) RETURNING {seq}"
    )


@functools.cache
def _insert_events_sql() -> str:
    return (
        f"WITH bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %s WHERE id = %s "
        f"RETURNING last_event_seq) {insert_events_from('bumped')}"
    )


def schedule_state(run_id: int) -> tuple | None:
    """For scheduling after a step ends, in one query: the run's status and
    coordinator_busy, whether the coordinator has unread mail, whether a step
    is pending, whether every step is done (terminal, none being resumed),
    and its workflow's id and created. None if the run does not exist."""
    with plain_cursor() as cursor:
        cursor.execute(_schedule_state_sql(), [COORDINATOR, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    return schedule_state_of(*row)


def schedule_state_of(status, busy, has_mail, has_pending, has_unfinished, workflow_id, created) -> tuple:
    created = from_db(Workflow, "created", created)
    return status, bool(busy), bool(has_mail), bool(has_pending), not has_unfinished, workflow_id, created


def _quoted(*values: str) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def schedule_flags(run: str, other_than: str = "") -> str:
    """Whether the coordinator of run ``run`` (a column or %s) has unread
    mail, a step is pending, and a step other than ``other_than`` (a step's
    id column or %s; empty: none) is unfinished.

    The kinds and statuses are written in, not bound: a prepared statement's
    generic plan could not tell that its parameters match the partial
    indexes step_pending and step_unfinished (runs/models.py), and would
    read every step of the run."""
    other = f" AND s.id <> {other_than}" if other_than else ""
    return (
        f"EXISTS(SELECT 1 {unread_from(run)}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} "
        f"AND s.kind = {_quoted(Step.Kind.STEP)} AND s.status = {_quoted(Step.Status.PENDING)}), "
        f"EXISTS(SELECT 1 FROM {table(Step)} s WHERE s.run_id = {run} AND s.kind <> {_quoted(Step.Kind.COORDINATOR)} "
        f"AND (s.resuming OR s.status NOT IN ({_quoted(*Step.TERMINAL)})){other})"
    )


@functools.cache
def _schedule_state_sql() -> str:
    # Plain SQL: the ORM took ten times longer to build this than
    # PostgreSQL to run it, after every step of a run.
    return (
        f"SELECT r.status, r.coordinator_busy, {schedule_flags('r.id')}, "
        f"r.workflow_id, w.created FROM {table(Run)} r JOIN {table(Workflow)} w ON w.id = r.workflow_id "
        "WHERE r.id = %s"
    )


class DjangoMailboxStore:
    """Mailboxes are Message rows; a mailbox is addressable when its Step row
    exists, and closed when the step's ``mailbox_closed`` is set."""

    def __init__(self, run_id: int, *, run_locked: bool = False, uow=None) -> None:
        """``run_locked``: the caller took the run's lock in a block that
        encloses every use of this store (a step turn's transaction), so the
        store does not take it again: one round trip fewer under the lock.
        A lock taken in a savepoint the store outlives would not do: a
        savepoint rolled back releases the locks taken inside it.

        ``uow``: the unit of work (runs/store/unit_of_work.py) whose block
        holds this store's messages; without one each is written at once."""
        self.run_id = run_id
        self.run_locked = run_locked
        self.uow = uow

    def register(self, mailbox: str) -> None:
        # Steps are registered by creating their rows when the run starts.
        if not Step.objects.filter(run_id=self.run_id, step_id=mailbox).exists():
            raise LookupError(f"run {self.run_id} has no step {mailbox!r} to register")

    def registered(self) -> list[str]:
        return sorted(Step.objects.filter(run_id=self.run_id, kind=Step.Kind.STEP).values_list("step_id", flat=True))

    def closed_reason(self, mailbox: str) -> DropReason | None:
        reason = (
            Step.objects.filter(run_id=self.run_id, step_id=mailbox)
            .values_list("mailbox_closed_reason", flat=True)
            .first()
        )
        return DropReason(reason) if reason else None

    # Plain SQL for what runs at every step turn and end (unread, close):
    # building these with the ORM cost more than running them.

    def unread_count(self, mailbox: str) -> int:
        self._write_held()
        with plain_cursor() as cursor:
            count, params = unread_count_sql(self.run_id, mailbox)
            cursor.execute(f"SELECT {count}", params)
            return cursor.fetchone()[0]

    def _cancelled(self) -> bool:
        with plain_cursor() as cursor:
            cursor.execute(f"SELECT status FROM {table(Run)} WHERE id = %s", [self.run_id])
            row = cursor.fetchone()
        return row is not None and row[0] == Run.Status.CANCELLED

    def mailbox_state(self, mailbox: str) -> MailboxState:
        kept = self.uow.kept_state(mailbox) if self.uow is not None else None
        if kept is not None:
            return kept
        # One query instead of four: it runs for every routed message.
        with plain_cursor() as cursor:
            cursor.execute(_mailbox_state_sql(), [mailbox, mailbox, self.run_id])
            row = cursor.fetchone()
        if row is None:
            return MailboxState(cancelled=False, registered=False, closed_reason=None, unread=0)
        state = mailbox_state_of(*row)
        return state if self.uow is None else self.uow.keep_state(mailbox, state)

    def next_message_id(self, prefix: str) -> str:
        if self.uow is not None:
            return f"{prefix}-{self.uow.next_number()}"
        return f"{prefix}-{_bump(self.run_id, 'last_message_no')}"

    def append(self, message: RouterMessage) -> None:
        # No savepoint (two round trips on every message) and no
        # MailboxStoreError: a failed INSERT fails the caller's transaction,
        # which rolls the turn back whole, so nothing is half routed, and the
        # turn is tried again.
        self._save(message, wake=message.recipient == COORDINATOR)

    def record_drop(self, message: RouterMessage, reason: DropReason) -> None:
        self._save(message, drop_reason=str(reason))

    def unread(self, mailbox: str) -> list[RouterMessage]:
        self._write_held()
        with plain_cursor() as cursor:
            cursor.execute(_unread_sql(), [self.run_id, mailbox])
            return [_router_message(*row) for row in cursor.fetchall()]

    # No savepoints below (two round trips each): these run inside the
    # caller's transaction, and an error in them fails it anyway.

    def mark_read(self, mailbox: str, message_ids: list[str]) -> list[str]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            rows = Message.objects.filter(run_id=self.run_id, recipient=mailbox, message_id__in=message_ids)
            # A dropped message counts as read, as in the in-memory store.
            already = sorted(rows.exclude(drained=None, drop_reason="").values_list("message_id", flat=True))
            rows.filter(drained=None, drop_reason="").update(drained=timezone.now())
            return already

    def close(self, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            if connection.vendor == "postgresql":
                # One statement: the reason (the run's status decides), the
                # close, and what it held dropped if this closed it.
                cancelled = [Run.Status.CANCELLED, str(DropReason.WORKFLOW_CANCELLED), str(reason)]
                rows = _returning(_close_and_drop_sql(), [*cancelled, self.run_id, mailbox, self.run_id, mailbox])
                return (DropReason(rows[0][1]) if rows else reason), [_router_message(*row[2:]) for row in rows]
            if self._cancelled():
                reason = DropReason.WORKFLOW_CANCELLED
            with plain_cursor() as cursor:
                cursor.execute(
                    f"UPDATE {table(Step)} SET mailbox_closed_reason = %s "
                    "WHERE run_id = %s AND step_id = %s AND mailbox_closed_reason = ''",
                    [str(reason), self.run_id, mailbox],
                )
                closed = cursor.rowcount
            if not closed:
                return reason, []
            return reason, self._drop_unread(mailbox, reason)

    def drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            return self._drop_unread(mailbox, reason)

    def _drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        if connection.vendor == "postgresql":
            rows = _returning(_drop_unread_sql(), [str(reason), self.run_id, mailbox])
            return [_router_message(*row[1:]) for row in rows]
        dropped = self.unread(mailbox)
        if dropped:
            Message.objects.filter(run_id=self.run_id, message_id__in=[m.message_id for m in dropped]).update(
                drop_reason=str(reason)
            )
        return dropped

    def _write_held(self) -> None:
        # What reads or changes messages must see the held ones, and what it
        # changes makes the kept mailbox states stale.
        if self.uow is not None:
            self.uow.flush()

    def _lock_run(self) -> None:
        # Sends take the run row's lock first (their message number): taking
        # it here too makes a drain or close wait for them and for each other,
        # then read what they committed, so no message is both drained and
        # dropped, drained twice, or left unread in a closed mailbox.
        if not self.run_locked:
            lock_run(self.run_id)

    def _save(self, message: RouterMessage, drop_reason: str = "", wake: bool = False) -> None:
        values = {
            "run": self.run_id,
            "message_id": message.message_id,
            "sender": message.sender,
            "recipient": message.recipient,
            "type": str(message.type),
            "content": message.content,
            "created": timezone.now(),
            "drained": None,
            "drop_reason": drop_reason,
        }
        if message.type == MessageType.CANCEL and not drop_reason and message.recipient != COORDINATOR:
            stop_waiting_after_commit(self.run_id, message.recipient)
        if self.uow is not None:
            self.uow.hold_message(values, wake=wake)
        elif not wake:
            insert(Message, **values)
        elif connection.vendor == "postgresql":
            # One round trip: the message and the coordinator's wake request.
            columns, params = row_values(Message, values)
            with plain_cursor() as cursor:
                cursor.execute(
                    f"WITH woken AS ({_wake_sql()}) "
                    f"INSERT INTO {table(Message)} ({columns}) "
                    f"SELECT {', '.join(['%s'] * len(params))} FROM woken RETURNING (SELECT busy FROM woken)",
                    [*_wake_sql_params(self.run_id), *params],
                )
                row = cursor.fetchone()
            if row is None:
                raise Run.DoesNotExist(f"run {self.run_id} does not exist")
            wake_after_commit(self.run_id, busy=bool(row[0]))
        else:
            insert(Message, **values)
            request_coordinator_wake(self.run_id)


def mailbox_state_of(status: str, kind: str | None, reason: str | None, unread: int) -> MailboxState:
    """A MailboxState from the run's status, the step's kind and close
    reason (None: no such step) and its unread count, as read together."""
    return MailboxState(
        cancelled=status == Run.Status.CANCELLED,
        registered=kind == Step.Kind.STEP,
        closed_reason=DropReason(reason) if reason else None,
        unread=unread,
    )


@functools.cache
def _mailbox_state_sql() -> str:
    return (
        "SELECT r.status, s.kind, s.mailbox_closed_reason, "
        f"(SELECT COUNT(*) {unread_from('r.id')}) "
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id AND s.step_id = %s "
        "WHERE r.id = %s"
    )


def unread_from(run: str, mailbox: str = "%s") -> str:
    """The FROM and WHERE of a mailbox's unread messages (``m``), the one
    definition every query here uses: the run is ``run``, the mailbox
    ``mailbox`` (each a column, or %s for a parameter)."""
    return f"FROM {table(Message)} m WHERE {_unread_where(run, mailbox)}"


def _unread_where(run: str, mailbox: str = "%s") -> str:
    return f"m.run_id = {run} AND m.recipient = {mailbox} AND m.drained IS NULL AND m.drop_reason = ''"


# What a RouterMessage is made of, in _router_message's order.
_MESSAGE_COLUMNS = "m.message_id, m.sender, m.recipient, m.type, m.content, m.created"


def _router_message(message_id, sender, recipient, type_, content, created) -> RouterMessage:
    return RouterMessage(
        message_id=message_id,
        sender=sender,
        recipient=recipient,
        type=MessageType.parse(type_),
        content=content,
        created=from_db(Message, "created", created).timestamp(),
    )


def _returning(statement: str, params: list) -> list[tuple]:
    """The rows an UPDATE ... RETURNING (m.id first) gave, oldest message first."""
    with plain_cursor() as cursor:
        cursor.execute(statement, params)
        return sorted(cursor.fetchall())  # RETURNING has no order


@functools.cache
def _drop_unread_sql() -> str:
    # PostgreSQL: the unread messages dropped and returned in one statement.
    return (
        f"UPDATE {table(Message)} m SET drop_reason = %s WHERE {_unread_where('%s')} RETURNING m.id, {_MESSAGE_COLUMNS}"
    )


@functools.cache
def _close_and_drop_sql() -> str:
    # PostgreSQL: the step's mailbox closed with the given reason, or
    # workflow-cancelled if the run is cancelled, and only if this statement
    # closed it, its unread messages dropped with that reason and returned.
    return (
        f"WITH closed AS (UPDATE {table(Step)} s SET mailbox_closed_reason = "
        f"CASE WHEN (SELECT status FROM {table(Run)} WHERE id = s.run_id) = %s THEN %s ELSE %s END "
        "WHERE s.run_id = %s AND s.step_id = %s AND s.mailbox_closed_reason = '' "
        "RETURNING s.mailbox_closed_reason AS reason) "
        f"UPDATE {table(Message)} m SET drop_reason = closed.reason FROM closed WHERE {_unread_where('%s')} "
        f"RETURNING m.id, closed.reason, {_MESSAGE_COLUMNS}"
    )


@functools.cache
def _unread_sql() -> str:
    return f"SELECT {_MESSAGE_COLUMNS} {unread_from('%s')} ORDER BY m.id"


def unread_count_sql(run_id: int, mailbox: str) -> tuple[str, list]:
    """A subquery counting ``mailbox``'s unread messages, and its parameters:
    ``unread_count`` selects it; a statement that writes can return it too."""
    return unread_count_of("%s", "%s"), [run_id, mailbox]


def unread_count_of(run: str, mailbox: str) -> str:
    """A subquery counting the unread messages of mailbox ``mailbox`` of run
    ``run``, each a column or %s (runs/sql.py step_for_turn selects it)."""
    return f"(SELECT COUNT(*) {unread_from(run, mailbox)})"


# A wake request queues a wake task only for an idle coordinator with none
# queued: every message a step sent to an idle coordinator queued one, and
# all but the first found nothing to do. The request that queues one marks
# the run (wake_queued); the wake that starts clears the mark, and so does a
# wake that finds another running (which reads what it was queued for) or a
# publish that failed. A mark older than a lease (ZENWEB_LEASE_SECONDS) is
# taken for a task the broker lost and holds nothing back.
def wake_sql(requests: str) -> tuple[str, str]:
    """For an UPDATE of the run row that adds ``requests`` (SQL) wake
    requests: the SET of the mark, and the RETURNING column that is true
    when no wake task need be queued (the coordinator busy, or a wake
    already queued). Parameters: ``wake_params()``'s first list for the SET
    (after ``requests``' own, when it is a %s), its second for the RETURNING."""
    marked = (
        f"wake_queued = CASE WHEN {requests} = 0 OR coordinator_busy OR wake_queued > %s THEN wake_queued ELSE %s END"
    )
    return marked, "coordinator_busy OR COALESCE(wake_queued <> %s, TRUE)"


def wake_params() -> tuple[list, list]:
    """The parameters of ``wake_sql``'s SET (when a mark stops counting, and
    now) and of its RETURNING (now)."""
    from django.conf import settings

    from runs.sql import db_value

    now = timezone.now()
    stale = now - timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    now_value = db_value(Run, "wake_queued", now)
    return [db_value(Run, "wake_queued", stale), now_value], [now_value]


@functools.cache
def _wake_sql() -> str:
    marked, held_back = wake_sql("1")
    return (
        f"UPDATE {table(Run)} SET wake_requests = wake_requests + 1, {marked} "
        f"WHERE id = %s RETURNING {held_back} AS busy"
    )


def _wake_sql_params(run_id: int) -> list:
    marked, held_back = wake_params()
    return [*marked, run_id, *held_back]


def request_coordinator_wake(run_id: int) -> None:
    """Count a reason for the coordinator to wake, and wake it after commit
    unless a wake runs or is queued."""
    with plain_cursor() as cursor:
        cursor.execute(_wake_sql(), _wake_sql_params(run_id))
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    wake_after_commit(run_id, busy=bool(row[0]))


# Runs this thread's transaction asked to wake, and whether one needs a
# task. Like the broadcasts: each request adds a callback, the first after
# commit sends the task, the others find nothing to do. An entry a rollback
# left behind at worst sends one wake too many, which finds nothing to do.
_wakes = threading.local()


def stop_waiting_after_commit(run_id: int, step_id: str) -> None:
    """A step waiting for a call's result takes no turn until it comes, so
    its turn would not read this cancel: stop it now if it waits (see
    actions.steps.do_stop_waiting_step)."""
    from runs import tasks

    transaction.on_commit(lambda: tasks.stop_waiting_step.delay(run_id, step_id), robust=True)


def wake_after_commit(run_id: int, *, busy: bool) -> None:
    """Wake the coordinator after commit, unless a wake is running or queued
    (``busy``): a running wake read wake_requests before reading its inbox
    and goes idle only if the count is unchanged, which this transaction's
    bump (holding the run row's lock until commit) sees to, so it loops and
    reads this message too; a queued one reads it when it starts."""
    from runs import tasks  # tasks import actions, which import this module

    pending: dict[int, bool] = _wakes.__dict__.setdefault("runs", {})
    pending[run_id] = pending.get(run_id, False) or not busy

    def wake() -> None:
        if pending.pop(run_id, False):
            try:
                tasks.wake_coordinator.delay(run_id)
            except Exception:
                # Not queued after all: let the next request queue one.
                Run.objects.filter(pk=run_id).update(wake_queued=None)
                raise

    transaction.on_commit(wake, robust=True)
