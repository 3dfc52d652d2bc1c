"""The event registry: every event type, and the pydantic model of its
``data``.

This is the one list of event types: the runtime, the Django store, the
live page, the graph, the API and the export's JSON Schema read it. The
models are in run_events.py and tool_events.py; each says which parts of a
run's page its event changes (``concerns``), so readers pick types by what
they draw, not by name. A new event type is a name here and a model there.
"""

from __future__ import annotations

from typing import Literal, get_args

from agents.events import run_events, tool_events
from agents.events.base import Concern, EventData

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
    "provider_retry",
]

EVENT_TYPES: tuple[str, ...] = get_args(EventType)

PAYLOADS: tuple[type[EventData], ...] = (*run_events.PAYLOADS, *tool_events.PAYLOADS)


def type_of(model: type[EventData]) -> str:
    """The event type ``model`` is the payload of (its ``type`` default)."""
    return model.model_fields["type"].default


# The registry: event type -> the model of its data.
REGISTRY: dict[str, type[EventData]] = {type_of(model): model for model in PAYLOADS}


def types_concerning(concern: Concern) -> frozenset[str]:
    """The event types that change ``concern`` on a run's page."""
    return frozenset(name for name, model in REGISTRY.items() if concern in model.concerns)
