"""An action's writes, held and written together: ``UnitOfWork``.

Every action makes one for a run (or is handed its caller's) and hands out what writes through it: its
event sink (``uow.sink``) and its mailbox store (``uow.mailboxes``), for a
router, a tool host, a turn's tool calls. ``with uow:`` joins the
caller's transaction, or outside any begins one and commits it at the
block's end (no savepoint: an error fails the caller's transaction, as any
of its statements' would). Inside the block they hold what they write
instead of writing it:

- events wait in memory, numbered when they are written;
- a routed message is numbered in memory (the run's counter is read once,
  with the coordinator's mailbox state: the mailbox every step sends to),
  a mailbox's state is read once and kept, its unread count moved by the
  messages held for it;
- ``flush`` writes the messages, the counter's new value, the
  coordinator's wake request and the events in one statement on
  PostgreSQL, and the block's end flushes what is left. Broadcasts and the
  wake task go out after commit (transaction.on_commit).

Read messages only through ``uow.mailboxes`` inside the block (it flushes
first: a query of its own would not see the held rows), and ``flush``
before calling code that writes with a sink of its own (a direct sink
numbers its event at once, ahead of the held ones). Nothing is written if
the block raises; ``savepoint`` forgets what a rolled-back savepoint held,
and ``undoable`` does so for a call that writes only through the block,
with a savepoint only once it reaches the database.

Whether the block holds the run's lock is ``locked``: set by ``lock`` and
``lock_run``, which take it, and by ``mark_locked`` for a lock the block's
transaction took with a statement that did more; the mailbox store then
does not take it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, MailboxState
from runs.store.events import NoticeAfterCommit
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import store
from runs.store.wakes import wake_after_commit


@dataclass
class _Held:
    """What one block holds."""

    # The run's last message number as this block has handed it out (None
    # until the first message of the block is numbered).
    last_no: int | None = None
    taken: int = 0
    rows: list[dict] = field(default_factory=list)
    wakes: int = 0
    events: list[tuple[RuntimeEvent, datetime]] = field(default_factory=list)
    # Mailbox states read in this block, kept up to date with its rows.
    # Only registered steps and the coordinator are kept: a name that is
    # not a step yet may become one in this block (spawn_worker).
    states: dict[str, MailboxState] = field(default_factory=dict)

    def copy(self) -> _Held:
        return replace(self, rows=list(self.rows), events=list(self.events), states={})


@dataclass
class _Undo:
    """An undoable block's (UnitOfWork.undoable): what was held before it,
    and its savepoint once it reached the database."""

    mark: _Held
    savepoint: str | None = None


class UnitOfWork:
    """One run's writes of one block (see the module's docstring)."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.sink = HeldEventSink(self)
        self._notice = NoticeAfterCommit(run_id)
        self.mailboxes = DjangoMailboxStore(run_id, uow=self)
        # Whether this block's transaction holds the run's lock (``lock``,
        # ``mark_locked``): the mailbox store then does not take it again.
        self.locked = False
        self._held: _Held | None = None
        self._undo: _Undo | None = None
        # How the open block ends (``__enter__``): its flush, then its transaction's end.
        self._exit: contextlib.ExitStack | None = None

    def __enter__(self) -> UnitOfWork:
        if self._held is not None:
            raise RuntimeError(f"run {self.run_id}: unit of work already open")
        # Exited in the reverse order: what the block holds is written, the
        # block closed, then its transaction left (committed if it began it).
        with contextlib.ExitStack() as stack:
            stack.enter_context(transaction.atomic(savepoint=False))
            stack.callback(self._close)
            stack.push(self._flush_unless_failed)
            self._held = _Held()
            self.locked = False
            self._exit = stack.pop_all()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        exit_stack, self._exit = self._exit, None
        if exit_stack is not None:
            exit_stack.__exit__(exc_type, exc, tb)

    def _flush_unless_failed(self, exc_type, exc, tb) -> None:
        if exc_type is None and not transaction.get_rollback():  # no queries in a doomed transaction
            self.flush()

    def _close(self) -> None:
        self._held = None
        self.locked = False

    @property
    def is_open(self) -> bool:
        return self._held is not None

    def lock(self) -> str:
        """Take the run's lock and read the message counter after it, for a
        block that will route (a coordinator's forwards); the run's status
        (store().locked_counter: one round trip on PostgreSQL)."""
        held = self._open()
        held.last_no, status, held.states = store().locked_counter(self.run_id)
        self.locked = True
        return status

    def lock_run(self) -> None:
        """Take the run's lock (store().lock_run), for a block that changes
        mailboxes or ends steps under it."""
        self._open()
        store().lock_run(self.run_id)
        self.locked = True

    def mark_locked(self) -> None:
        """The block's transaction took the run's lock with a statement
        that did more (a turn's record, a run read for update): the
        mailbox store need not take it again. Only for a lock taken in
        this block's transaction, not in a savepoint it outlives (a
        savepoint rolled back releases the locks taken inside it)."""
        self._open()
        self.locked = True

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A savepoint (``transaction.atomic()``) that, when it rolls back,
        also forgets what this block held inside it: rows and numbers (the
        next message takes the number again), events; what was written
        inside it (a flush, undone with it) is held again."""
        held = self._held
        mark = held.copy() if held is not None else None
        try:
            with transaction.atomic():
                yield
        except BaseException:
            if held is not None and self._held is held:
                self._held = mark
            raise

    @contextlib.contextmanager
    def undoable(self) -> Iterator[None]:
        """As ``savepoint``, for a call that writes only through this block
        (its sink and mailbox store: a messaging tool), whose writes stay
        held: the database savepoint (two round trips) is taken only if the
        block reaches the database first (a flush, or the mailbox store's
        own statements: ``write_messages``). A read it makes before that
        (the message counter, a mailbox's state) has no savepoint to fall
        back to: an error PostgreSQL raises for it fails the transaction,
        as any error of the turn's own statements does."""
        held = self._open()
        if self._undo is not None:
            raise RuntimeError(f"run {self.run_id}: undoable blocks do not nest")
        undo = self._undo = _Undo(held.copy())
        try:
            yield
        except BaseException:
            if undo.savepoint is not None:
                # Back where the savepoint was, as transaction.atomic() goes:
                # an error that marked the transaction (an inner atomic
                # block's) no longer dooms it, and the rollback may run.
                transaction.set_rollback(False)
                transaction.savepoint_rollback(undo.savepoint)
            if self._held is held:
                self._held = undo.mark
            raise
        else:
            if undo.savepoint is not None:
                transaction.savepoint_commit(undo.savepoint)
        finally:
            self._undo = None

    def _reaching_the_database(self) -> None:
        # Inside an undoable block: what follows is undone by a savepoint.
        if self._undo is not None and self._undo.savepoint is None:
            self._undo.savepoint = transaction.savepoint()

    # The sink's and the mailbox store's side.

    def hold_event(self, event: RuntimeEvent) -> None:
        self._open().events.append((event, timezone.now()))

    def next_number(self) -> int:
        held = self._open()
        if held.last_no is None:
            held.last_no, _, states = store().read_counter(self.run_id)
            for mailbox, state in states.items():
                held.states.setdefault(mailbox, state)
        held.last_no += 1
        held.taken += 1
        return held.last_no

    def kept_state(self, mailbox: str) -> MailboxState | None:
        return None if self._held is None else self._held.states.get(mailbox)

    def keep_state(self, mailbox: str, state: MailboxState) -> MailboxState:
        """``state`` as read from the database, plus what this block holds
        for ``mailbox``; kept for the rest of the block if ``mailbox`` is a
        step or the coordinator."""
        held = self._held
        if held is None:
            return state
        waiting = sum(1 for row in held.rows if row["recipient"] == mailbox and not row["drop_reason"])
        state = replace(state, unread=state.unread + waiting)
        if state.registered or mailbox == COORDINATOR:
            held.states[mailbox] = state
        return state

    def hold_message(self, values: dict, *, wake: bool) -> None:
        held = self._open()
        held.rows.append(values)
        if wake:
            held.wakes += 1
        kept = held.states.get(values["recipient"])
        if kept is not None and not values["drop_reason"]:
            held.states[values["recipient"]] = replace(kept, unread=kept.unread + 1)

    def write_messages(self) -> None:
        """Before the mailbox store reads or changes messages with a query of
        its own: the held messages written (``flush``, with the held events)
        and the kept mailbox states forgotten. With no message held, held
        events stay held (an INSERT fewer): the store writes no event, and
        a router's drops go through this block's sink, after them."""
        held = self._held
        if held is None:
            return
        self._reaching_the_database()
        if held.rows or held.taken:
            self.flush()
        else:
            held.states.clear()

    def flush(self) -> None:
        """Write what the block holds: its messages, the run's counter, the
        coordinator's wake request and its events (one statement on
        PostgreSQL). The block then reads mailbox states afresh. Nothing
        held, nothing written."""
        held = self._held
        if held is None:
            return
        held.states.clear()
        if held.rows or held.taken or held.events:
            self._reaching_the_database()
        rows, taken, wakes, events = held.rows, held.taken, held.wakes, held.events
        held.rows, held.taken, held.wakes, held.events = [], 0, 0, []
        if taken or rows:
            last_no, busy, last_seq = store().write_held(self.run_id, rows, taken, wakes, events)
            if last_seq is not None:  # its events went with it
                if events:
                    self._notice.wrote(last_seq)
                events = []
            if last_no != held.last_no:
                # The counter moved under the run's lock: something numbered a
                # message of this run without this block. Never commit that.
                raise RuntimeError(
                    f"run {self.run_id}: message numbers out of step (held up to {held.last_no}, stored {last_no})"
                )
            if wakes:
                wake_after_commit(self.run_id, busy=busy)
        if events:
            self._notice.wrote(store().insert_events(self.run_id, events)[-1])

    def _open(self) -> _Held:
        if self._held is None:
            raise RuntimeError(f"run {self.run_id}: written through a unit of work outside its block")
        return self._held


class UnitPerEventSink:
    """The event sink of code that writes outside a unit of work's block (a
    turn's side effects before its record, a router built without one, a
    test setting up a run's events): each event written at once, as a unit
    of work's flush writes it, in the caller's transaction or one of its
    own (no savepoint: an event that cannot be written fails the caller's
    transaction). Open pages hear once per commit of the newest event it
    wrote."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._notice = NoticeAfterCommit(run_id)

    def emit(self, event: RuntimeEvent) -> None:
        with transaction.atomic(savepoint=False):
            self._notice.wrote(store().insert_events(self.run_id, [(event, timezone.now())])[-1])


class HeldEventSink:
    """The event sink of a unit of work: its events wait for the block's flush."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.run_id = uow.run_id
        self._uow = uow

    def emit(self, event: RuntimeEvent) -> None:
        self._uow.hold_event(event)
