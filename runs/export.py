"""A run as one JSON document: what it was asked, its token totals, every
step with its transcript, messages, events, tool calls, artifacts, claims, approvals and
the command's answer. For archiving and bug reports; the run page's export
link and the admin's export action both build it here.

Tool call arguments go out as stored, with injected fields already masked.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import QuerySet
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from agents.events import REGISTRY, EventData
from runs.actions.budgets import token_totals
from runs.models import Approval, ApprovalDecision, Artifact, Claim, Command, Event, Message, Run, Step, ToolCall

FORMAT = "zenweb.run/1"
# Events can number tens of thousands: read them in chunks, never all at once.
EVENT_CHUNK = 2000
EVENT_FIELDS = ("seq", "type", "step_id", "data", "created")


class _EventRow(BaseModel):
    """One event as the export writes it (EVENT_FIELDS)."""

    model_config = ConfigDict(extra="forbid")
    seq: int
    step_id: str
    created: datetime


def _event_row(type_: str, payload: type[EventData]) -> type[_EventRow]:
    # A Literal of a value known only here: a type made at run time, which a
    # static checker cannot read (hence Any).
    the_type: Any = Literal[type_]
    return create_model(f"{payload.__name__}Event", __base__=_EventRow, type=(the_type, ...), data=(payload, ...))


@functools.cache
def event_schema() -> dict[str, Any]:
    """The JSON Schema of one exported event, generated from the event
    registry (agents.events.registry): a union of one row per type, told
    apart by ``type``, each with its type's ``data``."""
    rows = tuple(_event_row(type_, payload) for type_, payload in REGISTRY.items())
    # The union of types made at run time (so Any to a static checker); a
    # tuple of types is spread only by Union[].
    union_of: Any = Union
    schema = TypeAdapter(Annotated[union_of[rows], Field(discriminator="type")]).json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"{FORMAT} event", **schema}


def _fields(model: type[models.Model], *exclude: str) -> list[str]:
    """The model's columns by field name (a foreign key gives the related pk)."""
    return [field.name for field in model._meta.concrete_fields if field.name not in exclude]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in row.items()}


def _rows(queryset: QuerySet, *fields: str) -> list[dict[str, Any]]:
    return [_plain(row) for row in queryset.values(*fields)]


def _event_rows(run: Run) -> Iterator[dict[str, Any]]:
    values = Event.objects.filter(run=run).order_by("seq").values(*EVENT_FIELDS)
    return (_plain(row) for row in values.iterator(chunk_size=EVENT_CHUNK))


def json_chunks(value: Any) -> Iterator[str]:
    """``value`` as JSON text, piece by piece: a mapping's or a sequence's
    items one at a time, and an iterator (export_parts' events) as a list
    read as it goes; any other value, and an item holding no iterator, in
    one piece (json.dumps, DjangoJSONEncoder)."""
    if isinstance(value, Mapping) and _holds_iterator(value):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield f"{',' if n else ''}{json.dumps(str(key))}:"
            yield from json_chunks(item)
        yield "}"
    elif isinstance(value, Iterator) or (isinstance(value, list | tuple) and _holds_iterator(value)):
        yield "["
        for n, item in enumerate(value):
            if n:
                yield ","
            yield from json_chunks(item)
        yield "]"
    else:
        yield json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def _holds_iterator(value: Mapping | list | tuple) -> bool:
    items = value.values() if isinstance(value, Mapping) else value
    return any(
        isinstance(item, Iterator) or (isinstance(item, Mapping | list | tuple) and _holds_iterator(item))
        for item in items
    )


def _renamed(rows: list[dict[str, Any]], **names: str) -> list[dict[str, Any]]:
    """Rows with ``old=new`` keys renamed (``requested_by__username`` → ``requested_by``)."""
    for row in rows:
        for old, new in names.items():
            row[new] = row.pop(old)
    return rows


def _run(run: Run) -> dict[str, Any]:
    return _plain(
        {
            "id": run.pk,
            "workflow": {"id": run.workflow_id, "name": run.workflow.name, "version": run.workflow.version},
            "mode": run.mode,
            "status": run.status,
            "inputs": run.inputs,
            "command": run.command,
            "created_by": run.created_by.get_username() if run.created_by else None,
            "result": run.result,
            "error": run.error,
            "created": run.created,
            "started": run.started,
            "finished": run.finished,
            "last_event_seq": run.last_event_seq,
            "destructive_approved": run.destructive_approved,
            "parent_tool_call": run.parent_tool_call_id,
        }
    )


def _approvals(run: Run) -> list[dict[str, Any]]:
    approvals = _renamed(
        _rows(
            Approval.objects.filter(run=run).order_by("id"),
            *_fields(Approval, "run", "requested_by"),
            "requested_by__username",
        ),
        requested_by__username="requested_by",
    )
    decisions: dict[int, list[dict[str, Any]]] = {}
    rows = _rows(
        ApprovalDecision.objects.filter(approval__run=run).order_by("id"),
        *_fields(ApprovalDecision, "user"),
        "user__username",
    )
    for decision in _renamed(rows, user__username="user"):
        decisions.setdefault(decision.pop("approval"), []).append(decision)
    for approval in approvals:
        approval["decisions"] = decisions.get(approval["id"], [])
    return approvals


def _command(run: Run) -> dict[str, Any] | None:
    fields = [*_fields(Command, "run", "created_by"), "created_by__username"]
    rows = _renamed(_rows(Command.objects.filter(run=run), *fields), created_by__username="created_by")
    return rows[0] if rows else None


def export_run(run: Run) -> dict[str, Any]:
    """Everything zenweb stored about ``run``, as JSON-ready data."""
    document = export_parts(run)
    document["events"] = list(document["events"])
    return document


def export_parts(run: Run) -> dict[str, Any]:
    """export_run's document with its events still to be read: an iterator
    that reads them EVENT_CHUNK at a time as it is consumed (json_chunks
    writes it so, in bounded memory, whatever the run's size)."""
    return {
        "format": FORMAT,
        "run": _run(run),
        # By role: coordinator, the workflow's steps, spawned workers; and the coordinator's share.
        "tokens": token_totals(run).as_data(),
        "steps": _rows(Step.objects.filter(run=run).order_by("position", "id"), *_fields(Step, "run")),
        "messages": _rows(Message.objects.filter(run=run).order_by("id"), *_fields(Message, "run")),
        "events": _event_rows(run),
        # "step" is the step row's pk; "step_id" its runtime id, as in events and claims.
        "tool_calls": _renamed(
            _rows(ToolCall.objects.filter(run=run).order_by("id"), *_fields(ToolCall, "run"), "step__step_id"),
            step__step_id="step_id",
        ),
        "artifacts": _rows(Artifact.objects.filter(run=run).order_by("id"), *_fields(Artifact, "run")),
        "claims": _rows(Claim.objects.filter(run=run).order_by("id"), *_fields(Claim, "run")),
        "approvals": _approvals(run),
        "command": _command(run),
    }
