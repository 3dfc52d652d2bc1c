"""Django implementations of the runtime's protocols, for one run.

Both expect to be called inside a transaction (runs/actions.py opens it):
a message and the event that records it commit together or not at all.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import DatabaseError, connection, transaction
from django.db.models import F
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason, MailboxStoreError, MessageType, RouterMessage
from runs.models import Event, Message, Run, Step

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
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = {column} + 1 WHERE id = %s RETURNING {column}", [run_id])
        row = cursor.fetchone()
    if row is None:
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    return row[0]


def lock_run(run_id: int) -> None:
    """Take the run row's lock first in every transaction that changes a
    run's steps or mailboxes: the same order everywhere (run, then steps) so
    two writers never deadlock, and event numbers follow commit order."""
    Run.objects.select_for_update().filter(pk=run_id).values_list("pk", flat=True).first()


def broadcast(run_id: int, seq: int) -> None:
    """Tell open dashboards that event ``seq`` exists. Only the number travels:
    consumers read the event itself from the database, so a lost notification
    costs a little latency, never an event."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(run_group(run_id), {"type": "run.event", "seq": seq})
    except Exception as exc:  # noqa: BLE001 - Redis away: the consumers' poll still finds the event
        log.warning("could not notify dashboards of event %s of run %s: %s", seq, run_id, exc)


class DjangoEventSink:
    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

    def emit(self, event: RuntimeEvent) -> None:
        # No savepoint: an event that cannot be written fails its transaction.
        with transaction.atomic(savepoint=False):
            seq = _bump(self.run_id, "last_event_seq")
            Event.objects.create(run_id=self.run_id, seq=seq, type=event.type, step_id=event.step_id, data=event.data)
            transaction.on_commit(lambda: broadcast(self.run_id, seq))


class DjangoMailboxStore:
    """Mailboxes are Message rows; a mailbox is addressable when its Step row
    exists, and closed when the step's ``mailbox_closed`` is set."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id

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

    def unread_count(self, mailbox: str) -> int:
        return Message.objects.filter(run_id=self.run_id, recipient=mailbox, drained=None, drop_reason="").count()

    def is_cancelled(self) -> bool:
        return Run.objects.filter(pk=self.run_id, status=Run.Status.CANCELLED).exists()

    def next_message_id(self, prefix: str) -> str:
        return f"{prefix}-{_bump(self.run_id, 'last_message_no')}"

    def append(self, message: RouterMessage) -> None:
        try:
            with transaction.atomic():  # a savepoint: the drop can still be recorded
                self._save(message)
        except DatabaseError as exc:
            raise MailboxStoreError(f"{type(exc).__name__}: {exc}") from exc
        if message.recipient == COORDINATOR:
            request_coordinator_wake(self.run_id)

    def record_drop(self, message: RouterMessage, reason: DropReason) -> None:
        self._save(message, drop_reason=str(reason))

    def unread(self, mailbox: str) -> list[RouterMessage]:
        rows = Message.objects.filter(run_id=self.run_id, recipient=mailbox, drained=None, drop_reason="")
        return [_to_router(row) for row in rows.order_by("id")]

    def mark_read(self, mailbox: str, message_ids: list[str]) -> list[str]:
        with transaction.atomic():
            self._lock_run()
            rows = Message.objects.filter(run_id=self.run_id, recipient=mailbox, message_id__in=message_ids)
            # A dropped message counts as read, as in the in-memory store.
            already = sorted(rows.exclude(drained=None, drop_reason="").values_list("message_id", flat=True))
            rows.filter(drained=None, drop_reason="").update(drained=timezone.now())
            return already

    def close(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        with transaction.atomic():
            self._lock_run()
            closed = Step.objects.filter(run_id=self.run_id, step_id=mailbox, mailbox_closed_reason="").update(
                mailbox_closed_reason=str(reason)
            )
            if not closed:
                return []
            return self.drop_unread(mailbox, reason)

    def drop_unread(self, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        with transaction.atomic():
            self._lock_run()
            dropped = self.unread(mailbox)
            Message.objects.filter(run_id=self.run_id, message_id__in=[m.message_id for m in dropped]).update(
                drop_reason=str(reason)
            )
            return dropped

    def _lock_run(self) -> None:
        # Sends take the run row's lock first (their message number): taking
        # it here too makes a drain or close wait for them and for each other,
        # then read what they committed, so no message is both drained and
        # dropped, drained twice, or left unread in a closed mailbox.
        lock_run(self.run_id)

    def _save(self, message: RouterMessage, drop_reason: str = "") -> None:
        Message.objects.create(
            run_id=self.run_id,
            message_id=message.message_id,
            sender=message.sender,
            recipient=message.recipient,
            type=str(message.type),
            content=message.content,
            drop_reason=drop_reason,
        )


def _to_router(row: Message) -> RouterMessage:
    return RouterMessage(
        message_id=row.message_id,
        sender=row.sender,
        recipient=row.recipient,
        type=MessageType.parse(row.type),
        content=row.content,
        created=row.created.timestamp(),
    )


def request_coordinator_wake(run_id: int) -> None:
    """Count a reason for the coordinator to wake, and wake it after commit."""
    from runs import tasks  # tasks import actions, which import this module

    Run.objects.filter(pk=run_id).update(wake_requests=F("wake_requests") + 1)
    transaction.on_commit(lambda: tasks.wake_coordinator.delay(run_id), robust=True)
