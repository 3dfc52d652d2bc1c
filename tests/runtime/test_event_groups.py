"""Every event type is in one filter group, and severity follows the data."""

from __future__ import annotations

from agents.events import EVENT_TYPES
from agents.events.groups import GROUP_OF, GROUPS, severity_of, types_in


def test_every_event_type_has_a_group_the_page_offers():
    assert set(GROUP_OF) == set(EVENT_TYPES)
    assert set(GROUP_OF.values()) == set(GROUPS)
    assert sorted(name for group in GROUPS for name in types_in([group])) == sorted(EVENT_TYPES)


def test_severity_reads_the_outcome():
    assert severity_of("step_end", {"status": "failed", "output": ""}) == "error"
    assert severity_of("step_end", {"status": "cancelled", "output": ""}) == "warning"
    assert severity_of("step_end", {"status": "completed", "output": "x"}) == "info"
    assert severity_of("tool_result", {"ok": False}) == "error"
    assert severity_of("tool_result", {"ok": True}) == "info"
    assert severity_of("message_dropped", {}) == "warning"
    assert severity_of("error", None) == "error"
    assert severity_of("approval_decided", {"decision": "reject"}) == "warning"
    assert severity_of("approval_decided", {"decision": "approve"}) == "info"
