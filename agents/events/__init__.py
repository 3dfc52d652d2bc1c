"""Event types the runtime emits, and the sink it emits them to.

The ``type`` strings keep zenflow's names so that anyone who knows zenflow's
progress events can read a zenweb event log. Each type's ``data`` has a
pydantic model in ``agents.events.registry``; an event is
checked against it when it is made, so a wrong payload fails where it is
emitted, not in a reader. The sink is the only way the runtime reports what
happened; zenweb's Django sink writes each event in the same transaction as
the change it records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from agents.events.base import Concern, EventData
from agents.events.registry import EVENT_TYPES, REGISTRY, EventType, types_concerning

__all__ = [
    "EVENT_TYPES",
    "REGISTRY",
    "Concern",
    "Event",
    "EventData",
    "EventDataError",
    "EventSink",
    "EventType",
    "ListSink",
    "check_data",
    "types_concerning",
]


class EventDataError(ValueError):
    """An event whose type is not in the registry or whose data does not
    fit its type's model."""


def check_data(type_: str, data: dict[str, Any]) -> None:
    """Raise EventDataError unless ``data`` fits the model of ``type_``."""
    model = REGISTRY.get(type_)
    if model is None:
        raise EventDataError(f"unknown event type {type_!r}: not in agents.events.registry.REGISTRY")
    try:
        # The data is stored as given: the model only checks it.
        model.__pydantic_validator__.validate_python(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'data'}: {error['msg']}" for error in exc.errors()
        )
        raise EventDataError(f"{type_} event data does not fit {model.__name__}: {problems}") from None


@dataclass(frozen=True)
class Event:
    type: EventType
    step_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_data(self.type, self.data)


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class ListSink:
    """Keeps events in memory, in order. Used by runtime tests and the CLI."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of_type(self, type_: str) -> list[Event]:
        return [event for event in self.events if event.type == type_]
