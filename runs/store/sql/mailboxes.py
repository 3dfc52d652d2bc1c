"""A mailbox's unread messages (the one definition every statement here
uses), its state, and its mail dropped and closed."""

from __future__ import annotations

import functools

from django.utils import timezone

from agents.router import DropReason, MailboxState, MessageType, RouterMessage
from runs.models import Message, Run, Step
from runs.store.sql.base import Statements
from runs.store.sql.rows import from_db, table
from runs.store.sql.runs import cancelled


class MailboxStatements(Statements):
    def mailbox_state(self, run_id: int, mailbox: str) -> MailboxState:
        """``mailbox``'s state, in one query instead of four: it runs for every
        routed message."""
        with self.cursor() as cursor:
            cursor.execute(_mailbox_state_sql(), {"run": run_id, "mailbox": mailbox})
            row = cursor.fetchone()
        if row is None:
            return MailboxState(cancelled=False, registered=False, closed_reason=None, unread=0)
        return mailbox_state_of(*row)

    def unread(self, run_id: int, mailbox: str) -> list[RouterMessage]:
        return router_messages(self.fetch_all(*unread_statement(run_id, mailbox)))

    def unread_count(self, run_id: int, mailbox: str) -> int:
        count, params = unread_count_sql(run_id, mailbox)
        return self.fetch_all(f"SELECT {count}", params)[0][0]

    def close_mailbox(self, run_id: int, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        """Close ``mailbox`` with ``reason`` (workflow-cancelled if the run is
        cancelled) unless it is closed, and if this closed it, drop what waits
        in it unread: the reason and the dropped messages. Under the run's lock
        (one statement on PostgreSQL)."""
        if cancelled(run_id):
            reason = DropReason.WORKFLOW_CANCELLED
        closed = Step.objects.filter(run_id=run_id, step_id=mailbox, mailbox_closed_reason="").update(
            mailbox_closed_reason=str(reason)
        )
        return reason, (self.drop_unread(run_id, mailbox, reason) if closed else [])

    def drop_unread(self, run_id: int, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        """Drop what waits unread in ``mailbox`` with ``reason``; the dropped."""
        dropped = self.unread(run_id, mailbox)
        if dropped:
            Message.objects.filter(run_id=run_id, message_id__in=[m.message_id for m in dropped]).update(
                drop_reason=str(reason)
            )
        return dropped

    def mark_read(self, run_id: int, mailbox: str, message_ids: list[str]) -> list[str]:
        """Mark ``message_ids`` of ``mailbox`` read (drained) unless they were
        read or dropped already; those, sorted (a dropped message counts as
        read). Under the run's lock."""
        rows = Message.objects.filter(run_id=run_id, recipient=mailbox, message_id__in=message_ids)
        already = sorted(rows.exclude(drained=None, drop_reason="").values_list("message_id", flat=True))
        rows.filter(drained=None, drop_reason="").update(drained=timezone.now())
        return already


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
        f"FROM {table(Run)} r LEFT JOIN {table(Step)} s ON s.run_id = r.id AND s.step_id = %(mailbox)s "
        "WHERE r.id = %(run)s"
    )


def unread_statement(run_id: int, mailbox: str) -> tuple[str, dict]:
    """``unread``'s statement and its parameters, for a caller that sends it
    with others (``router_messages`` reads its rows)."""
    return _unread_sql(), {"run": run_id, "mailbox": mailbox}


def router_messages(rows: list[tuple]) -> list[RouterMessage]:
    return [router_message(*row) for row in rows]


@functools.cache
def _unread_sql() -> str:
    return f"SELECT {MESSAGE_COLUMNS} {unread_from('%(run)s')} ORDER BY m.id"


def unread_count_sql(run_id: int, mailbox: str) -> tuple[str, list]:
    """A subquery counting ``mailbox``'s unread messages, and its parameters:
    ``unread_count`` selects it; a statement that writes can return it too
    (``update_returning``: positional parameters)."""
    return unread_count_of("%s", "%s"), [run_id, mailbox]


def unread_count_of(run: str, mailbox: str) -> str:
    """A subquery counting the unread messages of mailbox ``mailbox`` of run
    ``run``, each a column or a placeholder (step_for_turn selects it)."""
    return f"(SELECT COUNT(*) {unread_from(run, mailbox)})"


def unread_from(run: str, mailbox: str = "%(mailbox)s") -> str:
    """The FROM and WHERE of a mailbox's unread messages (``m``), the one
    definition every query here uses: the run is ``run``, the mailbox
    ``mailbox`` (each a column, or a placeholder)."""
    return f"FROM {table(Message)} m WHERE {_unread_where(run, mailbox)}"


def _unread_where(run: str, mailbox: str = "%(mailbox)s") -> str:
    return f"m.run_id = {run} AND m.recipient = {mailbox} AND m.drained IS NULL AND m.drop_reason = ''"


# What a RouterMessage is made of, in router_message's order.
MESSAGE_COLUMNS = "m.message_id, m.sender, m.recipient, m.type, m.content, m.created"


def router_message(message_id, sender, recipient, type_, content, created) -> RouterMessage:
    return RouterMessage(
        message_id=message_id,
        sender=sender,
        recipient=recipient,
        type=MessageType.parse(type_),
        content=content,
        created=from_db(Message, "created", created).timestamp(),
    )


@functools.cache
def close_and_drop_sql() -> str:
    # PostgreSQL: the step's mailbox closed with the given reason, or
    # workflow-cancelled if the run is cancelled, and only if this statement
    # closed it, its unread messages dropped with that reason and returned.
    return (
        f"WITH closed AS (UPDATE {table(Step)} s SET mailbox_closed_reason = "
        f"CASE WHEN (SELECT status FROM {table(Run)} WHERE id = s.run_id) = %(cancelled)s "
        "THEN %(cancelled_reason)s ELSE %(reason)s END "
        "WHERE s.run_id = %(run)s AND s.step_id = %(mailbox)s AND s.mailbox_closed_reason = '' "
        "RETURNING s.mailbox_closed_reason AS reason) "
        f"UPDATE {table(Message)} m SET drop_reason = closed.reason FROM closed WHERE {_unread_where('%(run)s')} "
        f"RETURNING m.id, closed.reason, {MESSAGE_COLUMNS}"
    )


@functools.cache
def drop_unread_sql() -> str:
    # PostgreSQL: the unread messages dropped and returned in one statement.
    return (
        f"UPDATE {table(Message)} m SET drop_reason = %(reason)s WHERE {_unread_where('%(run)s')} "
        f"RETURNING m.id, {MESSAGE_COLUMNS}"
    )


@functools.cache
def mark_read_sql() -> str:
    return (
        f"WITH marked AS (UPDATE {table(Message)} m SET drained = %(now)s "
        f"WHERE {_unread_where('%(run)s')} AND m.message_id = ANY(%(ids)s) RETURNING m.id) "
        f"SELECT m.message_id FROM {table(Message)} m "
        "WHERE m.run_id = %(run)s AND m.recipient = %(mailbox)s AND m.message_id = ANY(%(ids)s) "
        "AND m.id NOT IN (SELECT id FROM marked)"
    )
