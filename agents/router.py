"""Hub-and-spoke message routing.

Step agents never talk to each other. ``send`` puts a step's message into the
coordinator's mailbox; ``forward`` puts the coordinator's message into one
step's mailbox. Every message ends in exactly one place: stored in a mailbox,
or dropped with exactly one ``message_dropped`` event and a ``dropped:
<reason>`` result for the sender.

The router holds no state of its own: registration, mailboxes and counters
live in a ``MailboxStore``, so any worker process can rebuild a router for a
run and see the same mailboxes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal, Protocol

from agents.events import Event, EventSink

COORDINATOR = "coordinator"
# Per mailbox; 0 means unbounded. At the cap the newest message is rejected.
DEFAULT_MAX_MAILBOX_SIZE = 10_000


class MessageType(StrEnum):
    INFO = "info"
    CANCEL = "cancel"
    CONTEXT_UPDATE = "context_update"
    RESUME_REPLY = "resume_reply"

    @classmethod
    def parse(cls, kind: str | None) -> MessageType:
        """Unknown kinds fall back to info, as zenflow's forward_to_agent does."""
        try:
            return cls(kind or cls.INFO)
        except ValueError:
            return cls.INFO


class DropReason(StrEnum):
    WORKFLOW_CANCELLED = "workflow-cancelled"
    TARGET_TERMINAL = "target-terminal"
    UNKNOWN_STEP = "unknown-step"
    MAILBOX_CLOSED_BY_FINALIZE = "mailbox-closed-by-finalize"
    MAX_WAKE_CYCLES = "max-wake-cycles"
    HOLD_TIMEOUT = "hold-timeout"
    MAILBOX_FULL = "mailbox-full"
    NO_TRANSCRIPT = "no-transcript"
    TRANSCRIPT_TOO_LARGE = "transcript-too-large"
    RESUME_SHUTDOWN = "resume-shutdown"
    RESOLVER_ERROR = "resolver-error"


@dataclass(frozen=True)
class RouterMessage:
    message_id: str
    sender: str
    recipient: str
    type: MessageType
    content: str
    created: float = field(default_factory=time.time)


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


class Resumer(Protocol):
    """Decides what happens to a forward to a step that already finished."""

    def __call__(self, message: RouterMessage) -> DropReason | None:
        """Accept ``message`` for a resumed turn (return None; the resumer
        stores it, the router then emits message_sent), or say why it must
        drop."""


@dataclass(frozen=True)
class Rejection:
    """A forward the router refuses outright: nothing is sent or dropped (the
    target is a container, not a step). ``text`` is the model's tool result,
    ``rejected: ...``."""

    text: str


# Turns a forward's target into a registered step id, rejects it, or says
# it names nothing (None).
Resolver = Callable[[str], "str | Rejection | None"]


class MailboxStoreError(RuntimeError):
    """A store could not keep a message; the router drops it as resolver-error
    (zenflow's reason for a failing store) instead of losing it."""


class DoubleDrainError(RuntimeError):
    """A drain found messages another drain had already delivered."""


@dataclass(frozen=True)
class SendResult:
    status: Literal["queued", "dropped", "rejected"]
    message_id: str
    reason: DropReason | None = None
    detail: str = ""

    @property
    def text(self) -> str:
        """What the sending model sees as its tool result."""
        if self.status == "queued":
            return f"queued: {self.message_id}"
        if self.status == "rejected":
            return self.detail
        text = f"dropped: {self.reason}"
        return f"{text}. {self.detail}" if self.detail else text


class MessageRouter:
    """Routes messages between the coordinator and step agents of one run."""

    def __init__(
        self,
        store: MailboxStore,
        sink: EventSink,
        *,
        max_mailbox_size: int = DEFAULT_MAX_MAILBOX_SIZE,
        resumer: Resumer | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        self.store = store
        self.sink = sink
        self.max_mailbox_size = max_mailbox_size
        self.resumer = resumer
        self.resolver = resolver

    def register(self, step_id: str) -> None:
        self.store.register(step_id)

    def send(self, sender: str, text: str, type_: MessageType = MessageType.INFO) -> SendResult:
        """A step agent's ``send_message``: always to the coordinator."""
        message = self._message("msg-send", sender, COORDINATOR, type_, text)
        return self._deliver(message, self.store.mailbox_state(COORDINATOR))

    def forward(self, target: str, text: str, kind: str | None = None) -> SendResult:
        """The coordinator's ``forward_to_agent``: to one registered step.

        Inside containers the target may be a bare step id; the resolver (if
        any) turns it into a runtime id, or rejects a container's own id."""
        type_ = MessageType.parse(kind)
        # The id first: a database store takes the run's lock with it, so the
        # state read next sees every write before it. One read serves the
        # common case, a registered target; only another name asks the
        # resolver and reads again. A rejected forward leaves its number unused.
        message = self._message("msg-fwd", COORDINATOR, target, type_, text)
        state = self.store.mailbox_state(target)
        # After a cancel every forward drops as workflow-cancelled, below,
        # whatever its target would have resolved to.
        if target != COORDINATOR and not state.registered and self.resolver is not None and not state.cancelled:
            try:
                resolved = self.resolver(target)
            except Exception as exc:  # a broken resolver must not lose the message
                return self._drop(message, DropReason.RESOLVER_ERROR, f"cannot resolve {target!r}: {exc}")
            if isinstance(resolved, Rejection):
                return SendResult("rejected", "", detail=resolved.text)
            if resolved is not None and resolved != target:
                message = replace(message, recipient=resolved)
                state = self.store.mailbox_state(resolved)
        if state.cancelled:
            return self._drop(message, DropReason.WORKFLOW_CANCELLED)
        if message.recipient == COORDINATOR or not state.registered:
            detail = (
                f"Registered steps: [{', '.join(self.store.registered())}]. Retry forward_to_agent "
                "with one of these ids, or call narrate with the same content."
            )
            return self._drop(message, DropReason.UNKNOWN_STEP, detail)
        return self._deliver(message, state)

    def drain(self, mailbox: str, only: list[RouterMessage] | None = None) -> list[RouterMessage]:
        """Take the unread messages out of ``mailbox`` (all, or just ``only``:
        the ones a model was shown), one event each."""
        messages = self.store.unread(mailbox) if only is None else list(only)
        if not messages:
            return []
        already = self.store.mark_read(mailbox, [m.message_id for m in messages])
        if already:
            # Another drain delivered these: delivering them again would
            # show the agent the same message twice.
            raise DoubleDrainError(f"{mailbox}: messages already drained: {', '.join(already)}")
        for message in messages:
            if mailbox == COORDINATOR:
                self.sink.emit(
                    Event(
                        "coordinator_inbox_message",
                        COORDINATOR,
                        {
                            "message_id": message.message_id,
                            "from": message.sender,
                            "msg_type": str(message.type),
                            "content": message.content,
                        },
                    )
                )
            else:
                self.sink.emit(
                    Event(
                        "agent_inbox_drain",
                        mailbox,
                        {
                            "message_id": message.message_id,
                            "from": message.sender,
                            "msg_type": str(message.type),
                        },
                    )
                )
        return messages

    def close(self, mailbox: str, reason: DropReason = DropReason.TARGET_TERMINAL) -> int:
        """Close a mailbox; its unread messages drop, one event each, and so
        does every later send to it, with the same reason."""
        reason, dropped = self.store.close(mailbox, reason)
        for message in dropped:
            self._emit_drop(message, reason)
        return len(dropped)

    def drop_unread(self, mailbox: str, reason: DropReason) -> int:
        """Drop what ``mailbox`` still holds unread, one event each, without
        closing it (a resumed step's late messages, for instance)."""
        dropped = self.store.drop_unread(mailbox, reason)
        for message in dropped:
            self._emit_drop(message, reason)
        return len(dropped)

    def _message(self, prefix: str, sender: str, recipient: str, type_: MessageType, text: str) -> RouterMessage:
        return RouterMessage(self.store.next_message_id(prefix), sender, recipient, type_, text)

    def _deliver(self, message: RouterMessage, state: MailboxState) -> SendResult:
        """Store ``message`` or drop it, by its recipient's ``state`` (read
        after the message got its id)."""
        if state.cancelled:
            return self._drop(message, DropReason.WORKFLOW_CANCELLED)
        closed = state.closed_reason
        if closed is not None:
            # A finished step may be resumed for one more turn; a reply that
            # a resume produced never resumes anything in turn.
            if (
                closed == DropReason.TARGET_TERMINAL
                and self.resumer
                and message.recipient != COORDINATOR
                and message.type != MessageType.RESUME_REPLY
            ):
                # The resumer stores what it accepts: the cap holds for a resumed mailbox too.
                if self._full(state):
                    return self._drop(message, DropReason.MAILBOX_FULL)
                refused = self.resumer(message)
                if refused is None:
                    self._emit_sent(message)
                    return SendResult("queued", message.message_id)
                return self._drop(message, refused)
            return self._drop(message, closed)
        if self._full(state):
            return self._drop(message, DropReason.MAILBOX_FULL)
        try:
            self.store.append(message)
        except MailboxStoreError as exc:
            return self._drop(message, DropReason.RESOLVER_ERROR, f"the mailbox store failed: {exc}")
        self._emit_sent(message)
        return SendResult("queued", message.message_id)

    def _emit_sent(self, message: RouterMessage) -> None:
        self.sink.emit(
            Event(
                "message_sent",
                message.sender,
                {
                    "message_id": message.message_id,
                    "from": message.sender,
                    "to": message.recipient,
                    "msg_type": str(message.type),
                    "content": message.content,
                },
            )
        )

    def _full(self, state: MailboxState) -> bool:
        return bool(self.max_mailbox_size) and state.unread >= self.max_mailbox_size

    def _drop(self, message: RouterMessage, reason: DropReason, detail: str = "") -> SendResult:
        self.store.record_drop(message, reason)
        self._emit_drop(message, reason)
        return SendResult("dropped", message.message_id, reason, detail)

    def _emit_drop(self, message: RouterMessage, reason: DropReason) -> None:
        self.sink.emit(
            Event(
                "message_dropped",
                message.sender,
                {
                    "reason": str(reason),
                    "from": message.sender,
                    "to": message.recipient,
                    "msg_type": str(message.type),
                    "message_id": message.message_id,
                },
            )
        )


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
