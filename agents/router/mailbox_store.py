"""Where mailboxes live: the MailboxStore protocol (runs/ implements it on
the database) and one in a dict for runtime tests and one-process use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agents.router.messages import COORDINATOR, DropReason, RouterMessage


@dataclass(frozen=True)
class MailboxState:
    """What routing a message to one mailbox depends on, read at once."""

    cancelled: bool
    # One of ``registered()``: a step a forward may address.
    registered: bool
    closed_reason: DropReason | None
    unread: int


class MailboxStore(Protocol):
    """Where mailboxes live. One store serves one run."""

    def register(self, mailbox: str) -> None:
        """Make ``mailbox`` addressable. Registering twice is harmless."""

    def registered(self) -> list[str]:
        """Every registered mailbox except the coordinator's, sorted."""

    def closed_reason(self, mailbox: str) -> DropReason | None:
        """Why ``mailbox`` was closed, or None while it is open."""

    def unread_count(self, mailbox: str) -> int: ...

    def mailbox_state(self, mailbox: str) -> MailboxState:
        """Whether the run is cancelled (every later send drops), whether
        ``mailbox`` is in ``registered()``, its ``closed_reason`` and
        ``unread_count``, together (one query for a database store: the
        router asks for them on every message)."""

    def next_message_id(self, prefix: str) -> str:
        """A run-unique id such as ``msg-fwd-3``."""

    def append(self, message: RouterMessage) -> None:
        """Store ``message`` unread in its recipient's mailbox."""

    def record_drop(self, message: RouterMessage, reason: DropReason) -> None:
        """Keep a message that could not be delivered, with why."""

    def unread(self, mailbox: str) -> list[RouterMessage]:
        """Unread messages, oldest first."""

    def mark_read(self, mailbox: str, message_ids: list[str]) -> list[str]:
        """Mark messages read; return the ids that had already been read."""

    def close(self, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        """Close ``mailbox`` with ``reason``, or with workflow-cancelled once
        the run is cancelled (decided with the close: one statement for a
        database store). Its unread messages become drops with that reason;
        returns the reason and the dropped messages (an already closed
        mailbox drops nothing). Later sends to it drop with the same reason."""

    def drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        """Drop the unread messages of ``mailbox`` (open or closed) with
        ``reason`` and return them."""


class MailboxStoreError(RuntimeError):
    """A store could not keep a message; the router drops it as resolver-error
    (zenflow's reason for a failing store) instead of losing it."""


class InMemoryMailboxStore:
    """A MailboxStore in a dict: for runtime tests and one-process use."""

    def __init__(self) -> None:
        self._registered: set[str] = {COORDINATOR}
        self._closed: dict[str, DropReason] = {}
        # Unread messages per mailbox, oldest first (dicts keep insertion
        # order), so a send's size check does not scan the mailbox's history.
        self._unread: dict[str, dict[str, RouterMessage]] = {}
        self._read: set[str] = set()
        self._counter = 0
        self.cancelled = False
        self.drops: list[tuple[RouterMessage, DropReason]] = []

    def register(self, mailbox: str) -> None:
        self._registered.add(mailbox)

    def registered(self) -> list[str]:
        return sorted(self._registered - {COORDINATOR})

    def closed_reason(self, mailbox: str) -> DropReason | None:
        return self._closed.get(mailbox)

    def unread_count(self, mailbox: str) -> int:
        return len(self._unread.get(mailbox, ()))

    def mailbox_state(self, mailbox: str) -> MailboxState:
        return MailboxState(
            cancelled=self.cancelled,
            registered=mailbox != COORDINATOR and mailbox in self._registered,
            closed_reason=self._closed.get(mailbox),
            unread=len(self._unread.get(mailbox, ())),
        )

    def next_message_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    def append(self, message: RouterMessage) -> None:
        self._unread.setdefault(message.recipient, {})[message.message_id] = message

    def record_drop(self, message: RouterMessage, reason: DropReason) -> None:
        self.drops.append((message, reason))

    def unread(self, mailbox: str) -> list[RouterMessage]:
        return list(self._unread.get(mailbox, {}).values())

    def mark_read(self, mailbox: str, message_ids: list[str]) -> list[str]:
        already = [mid for mid in message_ids if mid in self._read]
        # All or nothing: the router then refuses the whole drain, and with no
        # transaction to roll back, the fresh messages must stay unread.
        if not already:
            self._read.update(message_ids)
            unread = self._unread.get(mailbox, {})
            for message_id in message_ids:
                unread.pop(message_id, None)
        return already

    def close(self, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        if self.cancelled:
            reason = DropReason.WORKFLOW_CANCELLED
        if mailbox in self._closed:
            return reason, []
        self._closed[mailbox] = reason
        return reason, self.drop_unread(mailbox, reason)

    def drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        dropped = self.unread(mailbox)
        self._unread.pop(mailbox, None)
        self._read.update(m.message_id for m in dropped)
        self.drops.extend((m, reason) for m in dropped)
        return dropped
