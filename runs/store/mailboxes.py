"""The mailbox store: mailboxes are Message rows of a run."""

from __future__ import annotations

from typing import Protocol

from django.db import transaction
from django.utils import timezone

from agents.router import COORDINATOR, DropReason, MailboxState, MessageType, RouterMessage
from runs.models import Step
from runs.store.sql import store
from runs.store.wakes import stop_waiting_after_commit, wake_after_commit


class HeldMessages(Protocol):
    """What this store asks of the unit of work whose block holds its
    messages (runs/store/unit_of_work.py UnitOfWork, which builds the store)."""

    def next_number(self) -> int: ...
    def kept_state(self, mailbox: str) -> MailboxState | None: ...
    def keep_state(self, mailbox: str, state: MailboxState) -> MailboxState: ...
    def hold_message(self, values: dict, *, wake: bool) -> None: ...
    def write_messages(self) -> None: ...

    # Whether the block's transaction holds the run's lock.
    locked: bool


class DjangoMailboxStore:
    """Mailboxes are Message rows; a mailbox is addressable when its Step row
    exists, and closed when the step's ``mailbox_closed`` is set."""

    def __init__(self, run_id: int, *, uow: HeldMessages | None = None) -> None:
        """``uow``: the unit of work (runs/store/unit_of_work.py) whose block
        holds this store's messages; without one each is written at once.
        When its block holds the run's lock (``uow.locked``), the store does
        not take it again: one round trip fewer under the lock."""
        self.run_id = run_id
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
        return store().unread_count(self.run_id, mailbox)

    def mailbox_state(self, mailbox: str) -> MailboxState:
        kept = self.uow.kept_state(mailbox) if self.uow is not None else None
        if kept is not None:
            return kept
        state = store().mailbox_state(self.run_id, mailbox)
        return state if self.uow is None else self.uow.keep_state(mailbox, state)

    def next_message_id(self, prefix: str) -> str:
        if self.uow is not None:
            return f"{prefix}-{self.uow.next_number()}"
        return f"{prefix}-{store().bump_counter(self.run_id, 'last_message_no')}"

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
        return store().unread(self.run_id, mailbox)

    # No savepoints below (two round trips each): these run inside the
    # caller's transaction, and an error in them fails it anyway.

    def mark_read(self, mailbox: str, message_ids: list[str]) -> list[str]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            # A dropped message counts as read, as in the in-memory store.
            return store().mark_read(self.run_id, mailbox, message_ids)

    def close(self, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            return store().close_mailbox(self.run_id, mailbox, reason)

    def drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        self._write_held()
        with transaction.atomic(savepoint=False):
            self._lock_run()
            return store().drop_unread(self.run_id, mailbox, reason)

    def _write_held(self) -> None:
        # What reads or changes messages must see the held ones, and what it
        # changes makes the kept mailbox states stale.
        if self.uow is not None:
            self.uow.write_messages()

    def _lock_run(self) -> None:
        # Sends take the run row's lock first (their message number): taking
        # it here too makes a drain or close wait for them and for each other,
        # then read what they committed, so no message is both drained and
        # dropped, drained twice, or left unread in a closed mailbox.
        if self.uow is None or not self.uow.locked:
            store().lock_run(self.run_id)

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
            return
        busy = store().insert_message(self.run_id, values, wake=wake)
        if busy is not None:
            wake_after_commit(self.run_id, busy=busy)
