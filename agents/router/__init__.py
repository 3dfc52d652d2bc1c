"""Hub-and-spoke message routing.

Step agents never talk to each other. ``send`` puts a step's message into the
coordinator's mailbox; ``forward`` puts the coordinator's message into one
step's mailbox. Every message ends in exactly one place: stored in a mailbox,
or dropped with exactly one ``message_dropped`` event and a ``dropped:
<reason>`` result for the sender.

The router holds no state of its own: registration, mailboxes and counters
live in a ``MailboxStore``, so any worker process can rebuild a router for a
run and see the same mailboxes.

The package: ``messages`` (messages, drop reasons, send results),
``mailbox_store`` (the MailboxStore protocol, and one in memory) and
``routing`` (the MessageRouter). Import from ``agents.router``: these are
its public names.
"""

from __future__ import annotations

from agents.router.mailbox_store import (
    InMemoryMailboxStore,
    MailboxState,
    MailboxStore,
    MailboxStoreError,
)
from agents.router.messages import (
    COORDINATOR,
    DropReason,
    MessageType,
    RouterMessage,
    SendResult,
)
from agents.router.routing import (
    DEFAULT_MAX_MAILBOX_SIZE,
    DoubleDrainError,
    MessageRouter,
    Rejection,
    Resolver,
    ResumePolicy,
)

__all__ = [
    "COORDINATOR",
    "DEFAULT_MAX_MAILBOX_SIZE",
    "DoubleDrainError",
    "DropReason",
    "InMemoryMailboxStore",
    "MailboxState",
    "MailboxStore",
    "MailboxStoreError",
    "MessageRouter",
    "MessageType",
    "Rejection",
    "Resolver",
    "ResumePolicy",
    "RouterMessage",
    "SendResult",
]
