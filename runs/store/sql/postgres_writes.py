"""PostgreSQL's writes of rows, messages, mailboxes and events: each one
statement where the general store (runs/store/sql/store.py) sends several,
or one round trip where it sends two."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import DropReason, RouterMessage
from runs.models import Message, Run
from runs.store.sql.events import events_params, insert_events_sql
from runs.store.sql.mailboxes import close_and_drop_sql, drop_unread_sql, mark_read_sql, router_message
from runs.store.sql.messages import Written, count_params, write_held_sql
from runs.store.sql.pg_text import json_text
from runs.store.sql.rows import row_document, row_values, table
from runs.store.sql.runs import request_wake_params, request_wake_sql
from runs.store.sql.store import Store
from runs.store.sql.writes import insert_many_statement, set_ids, update_sql


class PostgresWrites(Store):
    def update(self, model, values: dict, where: str, params: list, *, locking_run: int | None = None) -> int:
        """The run's lock (``locking_run``) and the UPDATE in one statement."""
        return self.update_rows(*update_sql(model, values, where, params, locking_run=locking_run))

    def update_then_insert(self, update: tuple[str, list], objs: list) -> list[tuple]:
        """The UPDATE and the INSERT of ``objs`` in one round trip (``in_order``)."""
        if not objs:
            return super().update_then_insert(update, objs)
        changed, inserted = self.in_order([update, insert_many_statement(objs)])
        set_ids(objs, [pk for (pk,) in inserted])
        return changed

    def insert_many(self, objs: list) -> None:
        """The rows as one JSON document that jsonb_populate_recordset turns into rows."""
        if not objs:
            return
        with self.cursor() as cursor:
            cursor.execute(*insert_many_statement(objs))
            set_ids(objs, [pk for (pk,) in cursor.fetchall()])

    def insert_events(self, run_id: int, events: Sequence[tuple[RuntimeEvent, datetime]]) -> list[int]:
        """One round trip for them all: the counter's UPDATE (which locks the
        run row, as bump_counter does) numbers the rows."""
        seqs = sorted(seq for (seq,) in self.fetch_all(insert_events_sql(), events_params(run_id, events)))
        if len(seqs) != len(events):
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        return seqs

    def close_mailbox(self, run_id: int, mailbox: str, reason: DropReason) -> tuple[DropReason, list[RouterMessage]]:
        """One statement: the reason (the run's status decides), the close,
        and what it held dropped if this closed it."""
        params = {
            "cancelled": Run.Status.CANCELLED,
            "cancelled_reason": str(DropReason.WORKFLOW_CANCELLED),
            "reason": str(reason),
            "run": run_id,
            "mailbox": mailbox,
        }
        rows = self._returning(close_and_drop_sql(), params)
        return (DropReason(rows[0][1]) if rows else reason), [router_message(*row[2:]) for row in rows]

    def drop_unread(self, run_id: int, mailbox: str, reason: DropReason) -> list[RouterMessage]:
        """The unread messages dropped and returned in one statement."""
        rows = self._returning(drop_unread_sql(), {"reason": str(reason), "run": run_id, "mailbox": mailbox})
        return [router_message(*row[1:]) for row in rows]

    def mark_read(self, run_id: int, mailbox: str, message_ids: list[str]) -> list[str]:
        """One statement: the outer SELECT reads the rows as they were before
        its UPDATE, so what it finds and the UPDATE did not mark was read or
        dropped already."""
        params = {"run": run_id, "mailbox": mailbox, "ids": message_ids, "now": timezone.now()}
        return sorted(row[0] for row in self.fetch_all(mark_read_sql(), params))

    def _returning(self, statement: str, params: dict) -> list[tuple]:
        """The rows an UPDATE ... RETURNING (m.id first) gave, oldest message first."""
        return sorted(self.fetch_all(statement, params))  # RETURNING has no order

    def insert_message(self, run_id: int, values: dict, *, wake: bool) -> bool | None:
        """With ``wake``, one round trip: the message and the coordinator's wake request."""
        if not wake:
            return super().insert_message(run_id, values, wake=wake)
        columns, row = row_values(Message, values)
        # The row's values named by position: every message row has the same
        # columns, so the statement's text is the same each time.
        named = {f"value{index}": value for index, value in enumerate(row)}
        found = self.fetch_all(
            f"WITH woken AS ({request_wake_sql()}) "
            f"INSERT INTO {table(Message)} ({columns}) "
            f"SELECT {', '.join(f'%({name})s' for name in named)} FROM woken RETURNING (SELECT busy FROM woken)",
            {**request_wake_params(run_id), **named},
        )
        if not found:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        return bool(found[0][0])

    def write_held(self, run_id: int, rows: list[dict], taken: int, wakes: int, events: list) -> Written:
        """One round trip, with ``events``: the messages and the events each
        one JSON document, inserted in the order they were routed and
        emitted. Also returns the last event seq."""
        params = {
            **count_params(run_id, taken, len(events), wakes),
            "rows": json_text([row_document(Message, row) for row in rows]),
            **events_params(run_id, events),
        }
        found = self.fetch_all(write_held_sql(), params)
        if not found:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        return Written(found[0][0], bool(found[0][1]), found[0][2])
