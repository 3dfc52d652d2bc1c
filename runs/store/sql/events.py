"""Events stored numbered with the run's next seqs."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from agents.events import Event as RuntimeEvent
from runs.models import Event, Run
from runs.store.sql.pg_text import json_text
from runs.store.sql.rows import column_of, row_values, table
from runs.store.sql.writes import WriteStatements


class EventStatements(WriteStatements):
    def insert_events(self, run_id: int, events: Sequence[tuple[RuntimeEvent, datetime]]) -> list[int]:
        """Number ``events`` (each with its creation time) with the run's next
        seqs and store them, in order; return their seqs (one statement for
        them all on PostgreSQL)."""
        if not events:
            return []
        # The counter's UPDATE locks the run row (as bump_counter does) and
        # numbers the rows: the last of them is its new value.
        rows = self.fetch_all(_bumped_sql(), {"run": run_id, "event_count": len(events)})
        if not rows:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        seqs = list(range(rows[0][0] - len(events) + 1, rows[0][0] + 1))
        values = [
            row_values(Event, {**row, "seq": seq}) for row, seq in zip(event_rows(run_id, events), seqs, strict=True)
        ]
        holes = ", ".join(["%s"] * len(values[0][1]))
        with self.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table(Event)} ({values[0][0]}) VALUES ({holes})", [v for _, v in values])
        return seqs


def event_rows(run_id: int, events: Sequence[tuple[RuntimeEvent, datetime]]) -> list[dict]:
    return [
        {"run": run_id, "type": event.type, "step_id": event.step_id, "data": event.data, "created": created}
        for event, created in events
    ]


def events_params(run_id: int, events: Sequence[tuple[RuntimeEvent, datetime]]) -> dict:
    """The parameters of ``insert_events_from``: the run, how many events,
    and ``events`` (each with its creation time) as one JSON document, in
    order (PostgreSQL)."""
    document = json_text(
        [
            {"type": event.type, "step_id": event.step_id, "data": event.data, "created": created.isoformat()}
            for event, created in events
        ]
    )
    return {"run": run_id, "event_count": len(events), "events": document}


# An event row's columns and how insert_events_from fills each.
_EVENT_COLUMNS = {"run": "%(run)s", "type": "e.type", "step_id": "e.step_id", "data": "e.data", "created": "e.created"}


# The events of ``events_params``' JSON document as rows e(type, step_id,
# data, created, n), n their order from 1.
EVENT_ROWS = (
    "ROWS FROM (jsonb_to_recordset(%(events)s::jsonb) "
    "AS (type text, step_id text, data jsonb, created timestamptz)) WITH ORDINALITY "
    "AS e(type, step_id, data, created, n)"
)


@functools.cache
def insert_events_from(counter: str, rows: str = EVENT_ROWS, count: str = "%(event_count)s") -> str:
    """An INSERT of events numbered after ``counter``.last_event_seq (a CTE
    that added their ``count`` to the run's counter and returned it), from
    ``rows`` (by default one JSON document that jsonb_to_recordset turns
    into rows: PostgreSQL: psycopg dumps a typed array per column about
    four times slower); parameters: ``events_params``."""
    fields = [f.name for f in Event._meta.concrete_fields if not f.primary_key and f.name != "seq"]
    if fields != list(_EVENT_COLUMNS):
        raise RuntimeError(f"runs/store/sql/events.py writes events as {list(_EVENT_COLUMNS)}; the model has {fields}")
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column_of(Event, name)) for name in _EVENT_COLUMNS)
    seq = quote(column_of(Event, "seq"))
    return (
        f"INSERT INTO {table(Event)} ({columns}, {seq}) "
        f"SELECT {', '.join(_EVENT_COLUMNS.values())}, {counter}.last_event_seq - {count} + e.n "
        f"FROM {counter}, {rows} RETURNING {seq}"
    )


@functools.cache
def _bumped_sql() -> str:
    return (
        f"UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s WHERE id = %(run)s "
        "RETURNING last_event_seq"
    )


@functools.cache
def insert_events_sql() -> str:
    return (
        f"WITH bumped AS (UPDATE {table(Run)} SET last_event_seq = last_event_seq + %(event_count)s WHERE id = %(run)s "
        f"RETURNING last_event_seq) {insert_events_from('bumped')}"
    )
