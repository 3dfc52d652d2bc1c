"""The event registry: every event type, and the pydantic model of its
``data``.

This is the one list of event types: the runtime, the Django store, the
live page, the graph, the API and the export's JSON Schema read it. The
models are in run_events.py and tool_events.py; each says which parts of a
run's page its event changes (``concerns``), so readers pick types by what
they draw, not by name. A new event type is a name here and a model there.

An event is made from its model (``Event.of(StepEnd(status=..., output=...),
step_id)``) and its row read back with ``parse(type, data)``: readers match
on the model's class, never on keys of the stored ``data``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import ValidationError

from agents.events import run_events, tool_events
from agents.events.base import Concern, EventData

EventType = Literal[
    "workflow_start",
    "workflow_end",
    "step_start",
    "step_end",
    "step_skipped",
    "step_reused",
    "error",
    "agent_turn",
    "tool_call",
    "message_sent",
    "agent_inbox_drain",
    "coordinator_inbox_message",
    "coordinator_narration",
    "coordinator_message",
    "coordinator_synthesis",
    "message_dropped",
    "agent_idle",
    "agent_wake",
    "max_wake_cycles_warning",
    "resume_started",
    "resume_completed",
    "resume_failed",
    "resume_queued",
    "transcript_sealed",
    "message",
    # zenweb's own, in the same style
    "step_cancelled",
    "step_retry",
    "loop_iteration",
    "loop_judge",
    "loop_judged",
    "loop_end",
    "worker_spawned",
    "child_run_linked",
    "child_run_result",
    "claim_recorded",
    "approval_requested",
    "approval_decided",
    "approval_lapsed",
    "waiting_for_input",
    "input_received",
    "notification_failed",
    "workflow_created",
    "tool_created",
    "tool_registered",
    "tool_started",
    "tool_result",
    "run_resumed",
    "lease_expired",
    "run_stuck",
    "catalog_compacted",
    "coordinator_over_budget",
    "provider_retry",
]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)

PAYLOADS: tuple[type[EventData], ...] = (*run_events.PAYLOADS, *tool_events.PAYLOADS)


def type_of(model: type[EventData]) -> str:
    """The event type ``model`` is the payload of (its ``type`` default)."""
    default: str = model.model_fields["type"].default
    return default


# The registry: event type -> the model of its data.
REGISTRY: dict[str, type[EventData]] = {type_of(model): model for model in PAYLOADS}


class EventDataError(ValueError):
    """An event whose type is not in the registry or whose data does not
    fit its type's model."""


def _model_of(type_: str) -> type[EventData]:
    model = REGISTRY.get(type_)
    if model is None:
        raise EventDataError(f"unknown event type {type_!r}: not in agents.events.registry.REGISTRY")
    return model


def _misfit(type_: str, model: type[EventData], exc: ValidationError) -> EventDataError:
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'data'}: {error['msg']}" for error in exc.errors()
    )
    return EventDataError(f"{type_} event data does not fit {model.__name__}: {problems}")


def check_data(type_: str, data: Mapping[str, Any]) -> None:
    """Raise EventDataError unless ``data`` fits the model of ``type_``."""
    model = _model_of(type_)
    try:
        # The data is stored as given: the model only checks it.
        model.__pydantic_validator__.validate_python(data, by_name=False)
    except ValidationError as exc:
        raise _misfit(type_, model, exc) from None


def parse(type_: str, data: Mapping[str, Any]) -> EventData:
    """The model of a stored event: its row's ``type`` and ``data``.

    Raises EventDataError for a type the registry does not know or data
    that does not fit its model (every row was checked when written, so
    either means the row was written by something other than zenweb)."""
    model = _model_of(type_)
    try:
        return model.model_validate(data, by_name=False)
    except ValidationError as exc:
        raise _misfit(type_, model, exc) from None


def dump(payload: EventData) -> dict[str, Any]:
    """The ``data`` of ``payload`` as stored: the fields it was made with,
    under their stored names ("from"), without ``type`` (a column of its own)."""
    return payload.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude=_TYPE)


_TYPE: set[str] = {"type"}


def types_concerning(concern: Concern) -> frozenset[str]:
    """The event types that change ``concern`` on a run's page."""
    return frozenset(name for name, model in REGISTRY.items() if concern in model.concerns)
