"""The base of every event's payload model, and what on a run's page an
event can change."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

# What on a run's page an event changes: "graph" the steps' states and the
# messages between them, "new_steps" the step list (steps added), "tool_calls"
# the tool-call table, "governance" approvals, claims and the run's result.
Concern = Literal["graph", "new_steps", "tool_calls", "governance"]


class EventData(BaseModel):
    """The ``data`` of one event type: exactly its keys (an unknown one is
    refused). ``type`` is not stored in ``data`` (the event row has its own
    column): it defaults to the type's name. A field stored under another
    name (``sender``, stored as "from") is made by its name in code and read
    only by its stored name (``registry.parse``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: str
    concerns: ClassVar[frozenset[Concern]] = frozenset()


GRAPH: frozenset[Concern] = frozenset({"graph"})
