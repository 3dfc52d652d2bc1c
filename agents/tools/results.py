"""What a tool returns: the part the model sees, its bounds, and artifacts.

The model sees ``content`` (text, or JSON-ready data that is serialized for
it) and, for bounded tools, the ``bounds``. Artifacts are for people: they are
stored and drawn on the run page and never reach the model (Goa-AI calls them
server data). A result too large for the model is replaced by the
``omitted`` object with a preview, so one tool cannot flood a context window.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ArtifactKind = Literal["table", "timeseries", "json", "graph"]
Audience = Literal["timeline", "internal", "evidence"]

# Caps on what a tool may hand back: the model-facing text, and each artifact.
MAX_RESULT_CHARS = 16_000
RESULT_PREVIEW_CHARS = 1_000
MAX_ARTIFACT_BYTES = 512 * 1024


class Bounds(BaseModel):
    """How much of a list a bounded tool returned, with Goa-AI's rules: a
    truncated result says how to get more (a cursor) or how to ask for less
    (a refinement hint)."""

    model_config = ConfigDict(extra="forbid")

    returned: int = Field(ge=0)
    total: int | None = Field(default=None, ge=0)
    truncated: bool = False
    next_cursor: str | None = None
    refinement_hint: str | None = None

    @model_validator(mode="after")
    def _truncated_says_what_next(self) -> Bounds:
        if self.truncated and not (self.next_cursor or self.refinement_hint):
            raise ValueError("a truncated result needs next_cursor or refinement_hint")
        if self.total is not None and self.total < self.returned:
            raise ValueError(f"total ({self.total}) is less than returned ({self.returned})")
        return self

    def as_data(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class TableData(BaseModel):
    columns: list[str] = Field(min_length=1)
    rows: list[list[Any]]

    @model_validator(mode="after")
    def _rows_fit_columns(self) -> TableData:
        for n, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"row {n} has {len(row)} cells; the table has {len(self.columns)} columns")
        return self


class Series(BaseModel):
    name: str
    # (x, y) pairs; x is a number or an ISO date/time string, in order.
    points: list[tuple[float | str, float]]


class TimeSeriesData(BaseModel):
    series: list[Series] = Field(min_length=1)
    x_label: str = ""
    y_label: str = ""


class GraphData(BaseModel):
    nodes: list[str]
    edges: list[tuple[str, str]]


ARTIFACT_SCHEMAS: dict[str, type[BaseModel] | None] = {
    "table": TableData,
    "timeseries": TimeSeriesData,
    "graph": GraphData,
    "json": None,
}


@dataclass(frozen=True)
class Artifact:
    """Data for the people watching: a table, a time series (drawn as an SVG
    chart), a graph, or any JSON. ``source_tool`` is filled in by the registry."""

    kind: ArtifactKind
    data: Any
    title: str = ""
    audience: Audience = "evidence"
    source_tool: str = ""

    def checked(self) -> Artifact:
        """This artifact with its data validated for its kind; raises ValueError."""
        schema = ARTIFACT_SCHEMAS.get(self.kind, ...)
        if schema is ...:
            raise ValueError(f"unknown artifact kind {self.kind!r}")
        data = schema.model_validate(self.data).model_dump(mode="json") if schema else self.data
        size = len(json.dumps(data, default=str))
        if size > MAX_ARTIFACT_BYTES:
            raise ValueError(f"artifact {self.title or self.kind!r} is {size} bytes; the cap is {MAX_ARTIFACT_BYTES}")
        return Artifact(self.kind, data, self.title, self.audience, self.source_tool)

    def as_data(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "audience": self.audience,
            "source_tool": self.source_tool,
            "data": self.data,
        }


@dataclass(frozen=True)
class ToolAnswer:
    """A tool's answer. ``content`` is for the model; ``artifacts`` are not.
    A bounded tool must give ``bounds`` on success; ``pending`` means the
    result comes later (a child run is working on it, or a person is asked:
    ``approval_id``, the question)."""

    content: Any = ""
    bounds: Bounds | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    pending: bool = False
    child_run_id: str | None = None
    approval_id: str | None = None

    def model_text(self, limit: int = MAX_RESULT_CHARS) -> tuple[str, bool]:
        """The text the model sees and whether it had to be omitted for size."""
        if isinstance(self.content, str) and self.bounds is None:
            text = self.content
        else:
            payload: dict[str, Any] = {"result": self.content}
            if self.bounds is not None:
                payload["bounds"] = self.bounds.as_data()
            text = json.dumps(payload, ensure_ascii=False, default=str)
        if len(text) <= limit:
            return text, False
        omitted: dict[str, Any] = {
            "omitted": True,
            "reason": "size_limit",
            "preview": text[:RESULT_PREVIEW_CHARS],
        }
        if self.bounds is not None:
            omitted["bounds"] = self.bounds.as_data()
        return json.dumps(omitted, ensure_ascii=False), True


# runs/actions/children.py imports ToolAnswer as ToolResult: this alias goes when it imports it by its name.
ToolResult = ToolAnswer
