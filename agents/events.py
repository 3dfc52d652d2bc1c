"""Event types the runtime emits, and the sink it emits them to.

The ``type`` strings keep zenflow's names so that anyone who knows zenflow's
progress events can read a zenweb event log. The sink is the only way the
runtime reports what happened; zenweb's Django sink writes each event in the
same transaction as the change it records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

EventType = Literal[
    "workflow_start",
    "workflow_end",
    "step_start",
    "step_end",
    "step_skipped",
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
    # zenweb's own, in the same style
    "step_cancelled",
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
    "tool_started",
    "tool_result",
    "run_resumed",
    "lease_expired",
    "run_stuck",
    "catalog_compacted",
    "coordinator_over_budget",
    # a model call failed and is tried again: status, message, attempt, wait
    "provider_retry",
]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)


@dataclass(frozen=True)
class Event:
    type: EventType
    step_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)


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
