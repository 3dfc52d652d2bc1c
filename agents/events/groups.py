"""What a person filters a run's events by: each type's group (messages,
tools, approvals...) and each event's severity (info, warning, error).

A type's group is fixed; its severity may depend on its data (a step_end
that failed is an error, one that completed is not), so severity is a list
of rules a reader can apply to one event (``severity_of``) or turn into a
database filter (``SEVERITY_RULES``: type, field, values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agents.events.registry import EVENT_TYPES

Group = Literal["lifecycle", "messages", "agents", "tools", "loops", "approvals", "errors"]
GROUPS: tuple[Group, ...] = ("lifecycle", "messages", "agents", "tools", "loops", "approvals", "errors")

GROUP_OF: dict[str, Group] = {
    "workflow_start": "lifecycle",
    "workflow_end": "lifecycle",
    "step_start": "lifecycle",
    "step_end": "lifecycle",
    "step_skipped": "lifecycle",
    "step_reused": "lifecycle",
    "step_cancelled": "lifecycle",
    "step_retry": "lifecycle",
    "run_resumed": "lifecycle",
    "worker_spawned": "lifecycle",
    "child_run_linked": "lifecycle",
    "child_run_result": "lifecycle",
    "message_sent": "messages",
    "message_dropped": "messages",
    "agent_inbox_drain": "messages",
    "coordinator_inbox_message": "messages",
    "coordinator_message": "messages",
    "coordinator_narration": "messages",
    "coordinator_synthesis": "messages",
    "resume_started": "messages",
    "resume_completed": "messages",
    "resume_queued": "messages",
    "message": "lifecycle",
    "agent_turn": "agents",
    "agent_idle": "agents",
    "agent_wake": "agents",
    "max_wake_cycles_warning": "agents",
    "provider_retry": "agents",
    "catalog_compacted": "agents",
    "coordinator_over_budget": "agents",
    "tool_call": "tools",
    "tool_started": "tools",
    "tool_result": "tools",
    "claim_recorded": "tools",
    "loop_iteration": "loops",
    "loop_judge": "loops",
    "loop_judged": "loops",
    "loop_end": "loops",
    "approval_requested": "approvals",
    "approval_decided": "approvals",
    "approval_lapsed": "approvals",
    "waiting_for_input": "approvals",
    "input_received": "approvals",
    "notification_failed": "approvals",
    "workflow_created": "tools",
    "tool_created": "approvals",
    "tool_registered": "approvals",
    "error": "errors",
    "resume_failed": "errors",
    "transcript_sealed": "errors",
    "lease_expired": "errors",
    "run_stuck": "errors",
}

Severity = Literal["info", "warning", "error"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")

# (severity, type, field, values): an event of ``type`` whose data has
# ``field`` in ``values`` (no field: every event of the type). The first
# rule that matches wins; an event no rule matches is "info".
SEVERITY_RULES: tuple[tuple[Severity, str, str | None, tuple[Any, ...]], ...] = (
    ("error", "error", None, ()),
    ("error", "resume_failed", None, ()),
    ("error", "step_end", "status", ("failed",)),
    ("error", "workflow_end", "status", ("failed",)),
    ("error", "loop_end", "status", ("failed",)),
    ("error", "child_run_result", "status", ("failed",)),
    ("error", "tool_call", "ok", (False,)),
    ("error", "tool_result", "ok", (False,)),
    ("warning", "message_dropped", None, ()),
    ("warning", "transcript_sealed", None, ()),
    ("warning", "step_cancelled", None, ()),
    ("warning", "step_skipped", None, ()),
    ("warning", "step_retry", None, ()),
    ("warning", "max_wake_cycles_warning", None, ()),
    ("warning", "provider_retry", None, ()),
    ("warning", "coordinator_over_budget", None, ()),
    ("warning", "approval_lapsed", None, ()),
    ("warning", "notification_failed", None, ()),
    ("warning", "lease_expired", None, ()),
    ("warning", "run_stuck", None, ()),
    ("warning", "approval_decided", "decision", ("reject",)),
    ("warning", "tool_registered", "status", ("rejected", "lapsed")),
    ("warning", "step_end", "status", ("cancelled", "skipped")),
    ("warning", "workflow_end", "status", ("partial", "cancelled", "blocked")),
)


def severity_of(type_: str, data: Mapping[str, Any] | None) -> Severity:
    """How much one event asks for attention."""
    data = data or {}
    for severity, rule_type, field, values in SEVERITY_RULES:
        if rule_type == type_ and (field is None or (field in data and data[field] in values)):
            return severity
    return "info"


def types_in(groups: list[str]) -> list[str]:
    """The event types of ``groups``, in the registry's order."""
    return [name for name in EVENT_TYPES if GROUP_OF.get(name) in groups]
