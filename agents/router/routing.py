"""The MessageRouter: hub-and-spoke sends and forwards, drains, closes, and
a drop, with its event, for every message that cannot be delivered."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from agents import metrics
from agents.events import Event, EventData, EventSink
from agents.events.run_events import AgentInboxDrain, CoordinatorInboxMessage, MessageDropped, MessageSent
from agents.router.mailbox_store import MailboxState, MailboxStore, MailboxStoreError
from agents.router.messages import COORDINATOR, DropReason, MessageType, RouterMessage, SendResult

# Per mailbox; 0 means unbounded. At the cap the newest message is rejected.
DEFAULT_MAX_MAILBOX_SIZE = 10_000


class ResumePolicy(Protocol):
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


class DoubleDrainError(RuntimeError):
    """A drain found messages another drain had already delivered."""


class MessageRouter:
    """Routes messages between the coordinator and step agents of one run."""

    def __init__(
        self,
        store: MailboxStore,
        sink: EventSink,
        *,
        max_mailbox_size: int = DEFAULT_MAX_MAILBOX_SIZE,
        resumer: ResumePolicy | None = None,
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
                drained: EventData = CoordinatorInboxMessage(
                    message_id=message.message_id,
                    sender=message.sender,
                    msg_type=str(message.type),
                    content=message.content,
                )
                self.sink.emit(Event.of(drained, COORDINATOR))
            else:
                drained = AgentInboxDrain(
                    message_id=message.message_id, sender=message.sender, msg_type=str(message.type)
                )
                self.sink.emit(Event.of(drained, mailbox))
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
        sent = MessageSent(
            message_id=message.message_id,
            sender=message.sender,
            to=message.recipient,
            msg_type=str(message.type),
            content=message.content,
        )
        self.sink.emit(Event.of(sent, message.sender))

    def _full(self, state: MailboxState) -> bool:
        return bool(self.max_mailbox_size) and state.unread >= self.max_mailbox_size

    def _drop(self, message: RouterMessage, reason: DropReason, detail: str = "") -> SendResult:
        self.store.record_drop(message, reason)
        self._emit_drop(message, reason)
        metrics.message_dropped(str(reason))
        return SendResult("dropped", message.message_id, reason, detail)

    def _emit_drop(self, message: RouterMessage, reason: DropReason) -> None:
        dropped = MessageDropped(
            reason=str(reason),
            sender=message.sender,
            to=message.recipient,
            msg_type=str(message.type),
            message_id=message.message_id,
        )
        self.sink.emit(Event.of(dropped, message.sender))
