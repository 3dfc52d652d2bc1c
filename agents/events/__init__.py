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
from typing import Any, Protocol, cast

from agents.events.base import Concern, EventData
from agents.events.registry import (
    EVENT_TYPES,
    REGISTRY,
    EventDataError,
    EventType,
    check_data,
    dump,
    parse,
    types_concerning,
)

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
    "parse",
    "types_concerning",
]


@dataclass(frozen=True)
class Event:
    """One event as it is stored: its type, its step and its ``data``.
    Made from its model with ``Event.of``; ``payload`` is that model."""

    type: EventType
    step_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    _payload: EventData | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self._payload is None:
            check_data(self.type, self.data)

    @classmethod
    def of(cls, payload: EventData, step_id: str = "") -> Event:
        """The event of ``payload`` for ``step_id``. The model checked its
        fields when it was made, so its dump is not checked again."""
        return cls(cast(EventType, payload.type), step_id, dump(payload), payload)

    @property
    def payload(self) -> EventData:
        """The model of this event's data."""
        return self._payload if self._payload is not None else parse(self.type, self.data)


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
