"""The handler's shapes: a COORDINATOR_SELECTION (what the model proposes), a
COORDINATOR_RESULT (what the Executor is told) and the claims it carries."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agents.criteria import ConstraintCheck, CriterionCheck

SelectionStatus = Literal["selected", "needs_more_info", "needs_clarification", "blocked"]
ResultStatus = Literal["running", "success", "error", "blocked", "needs_more_info", "needs_clarification"]
# Every status but "running" is an answer that stays (docs/api.md, "Command status").
FINAL_STATUSES: frozenset[str] = frozenset(get_args(ResultStatus)) - {"running"}

_TTL = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$", re.I)
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


SELECTION_REASON = (
    'Why this workflow: "trigger matched: ..." (its triggers in the command), "name given: ..." '
    "(the command or the person named it), or the model's own reason."
)


class SelectionError(ValueError):
    """The model's answer is not a usable COORDINATOR_SELECTION; the message says why."""


class _Shape(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    def to_data(self) -> dict[str, Any]:
        """JSON-ready data, with ``_type`` (its alias) naming the shape."""
        return self.model_dump(mode="json", by_alias=True)


class ClarificationOption(_Shape):
    interpretation: str
    would_select: str


class CommandContext(_Shape):
    """What the Executor says with a command, besides the command itself. A
    ``workflow_hint`` suggests a workflow; it never overrides what the
    command asks for."""

    model_config = ConfigDict(extra="forbid")

    goal_focus: str | None = Field(default=None, max_length=2000)
    workflow_hint: str | None = Field(default=None, max_length=200)
    original_query: str | None = Field(default=None, max_length=4000)


class CoordinatorSelection(_Shape):
    """What the model proposes for one command. Nothing runs until ``decide`` agrees."""

    type_: Literal["COORDINATOR_SELECTION"] = Field(default="COORDINATOR_SELECTION", alias="_type")
    command_received: str
    workflow_selected: str | None = None
    workflow_args: dict[str, Any] = Field(default_factory=dict)
    status: SelectionStatus
    missing: list[str] = Field(default_factory=list)
    message: str | None = None
    error: str | None = None
    clarification_options: list[ClarificationOption] = Field(default_factory=list)
    selection_reason: str | None = Field(default=None, max_length=2000, description=SELECTION_REASON)

    @model_validator(mode="before")
    @classmethod
    def _null_means_empty(cls, data: Any) -> Any:
        # Models write "missing": null as often as they leave it out.
        if isinstance(data, dict):
            empty: dict[str, Any] = {"workflow_args": {}, "missing": [], "clarification_options": []}
            data = {k: (empty[k] if k in empty and v is None else v) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _selected_names_a_workflow(self) -> CoordinatorSelection:
        if self.status == "selected" and not self.workflow_selected:
            raise ValueError("field 'workflow_selected': required when status is 'selected'")
        return self


class SourcedClaim(_Shape):
    """One sourced statement a workflow found, with how sure it is and how long it holds."""

    claim: str = Field(min_length=1, max_length=2000)
    confidence: float = Field(ge=0, le=1)
    source_name: str = ""
    source_domain: str = ""
    url: str | None = None
    title: str | None = None
    source_type: str = "web"
    source_ref: str | None = None
    ttl: str | None = Field(default=None, description='"30m", "24h", "7d" or seconds ("3600")')

    @field_validator("ttl")
    @classmethod
    def _ttl_has_a_unit_we_know(cls, value: str | None) -> str | None:
        if value is not None:
            ttl_seconds(value)
        return value

    def lacks_source(self) -> bool:
        """True when the claim cannot be traced: no url or no source_ref."""
        return not self.url or not self.source_ref

    def expires_at(self, now: datetime) -> datetime | None:
        """When the claim stops holding, counted from ``now``; None without a ttl."""
        if self.ttl is None:
            return None
        return now + timedelta(seconds=ttl_seconds(self.ttl))

    def safe_url(self) -> str | None:
        """The url if it is an http(s) address with a host, else None (never javascript: and the like)."""
        if not self.url:
            return None
        try:
            parts = urlsplit(self.url.strip())
        except ValueError:
            return None
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            return None
        return self.url.strip()


class Finding(_Shape):
    """One thing a workflow found: a claim it recorded, with its source."""

    model_config = ConfigDict(extra="allow")

    claim: str | None = None
    url: str | None = None
    source_name: str | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)


class WorkflowOutcome(_Shape):
    """A run's result as the Executor reads it: what it found, how many
    sources back it, how long it took, and its final text."""

    findings: list[Finding] = Field(default_factory=list)
    sources_visited: int = Field(default=0, ge=0, description="Distinct sources (url or source_ref) its claims cite.")
    duration_ms: int = Field(default=0, ge=0, description="From the run's start to its end.")
    summary: str = Field(default="", description="The run's final text.")


class ToolRun(_Shape):
    tool: str
    status: str
    duration_ms: int = Field(ge=0)


class CoordinatorResult(_Shape):
    """What the handler reports back to the Executor for one command."""

    type_: Literal["COORDINATOR_RESULT"] = Field(default="COORDINATOR_RESULT", alias="_type")
    command_received: str
    workflow_selected: str | None = None
    workflow_args: dict[str, Any] = Field(default_factory=dict)
    status: ResultStatus
    result: WorkflowOutcome | None = None
    claims: list[SourcedClaim] = Field(default_factory=list)
    tool_runs: list[ToolRun] = Field(default_factory=list)
    error: str | None = None
    requires_approval: bool = False
    requires_retry: bool = False
    missing: list[str] = Field(default_factory=list)
    message: str | None = None
    clarification_options: list[ClarificationOption] = Field(default_factory=list)
    selection_reason: str | None = Field(default=None, description=SELECTION_REASON)
    # Checked when the run completed: the workflow's successCriteria, and the
    # budget and count the command states (agents.criteria).
    criteria: list[CriterionCheck] = Field(default_factory=list)
    constraints: list[ConstraintCheck] = Field(default_factory=list)

    def to_markdown(self, iteration: int) -> str:
        """The "Executor Iteration" section appended to the Executor's notes, with a claims table."""
        lines = [
            f"### Executor Iteration {iteration}",
            "**Action:** COMMAND",
            f'**Command:** "{_one_line(self.command_received)}"',
            f"**Coordinator:** {self._coordinator_line()}",
            f"**Result:** {self._result_line()}",
        ]
        if self.claims:
            lines += ["**Claims:**", "| Claim | Confidence | Source | TTL |", "|-------|------------|--------|-----|"]
            for claim in self.claims:
                cells = [claim.claim, f"{claim.confidence:.2f}", claim.source_domain or claim.source_name or "-"]
                cells.append(claim.ttl or "-")
                lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        elif self.status == "success":
            lines.append("**Claims:** none")
        return "\n".join(lines)

    def _coordinator_line(self) -> str:
        if not self.workflow_selected:
            return "no workflow selected"
        args = self.workflow_args
        free_text = next((args[k] for k in ("query", "topic", "subject") if isinstance(args.get(k), str)), None)
        if free_text is not None:
            return f'{self.workflow_selected} → "{_one_line(free_text)}"'
        if args:
            summary = ", ".join(f"{k}={shortened(json.dumps(v, ensure_ascii=False))}" for k, v in args.items())
            return f"{self.workflow_selected} → {_one_line(summary)}"
        return self.workflow_selected

    def _result_line(self) -> str:
        if self.status == "running":
            return "RUNNING - the workflow is under way; its result follows when it ends"
        if self.status == "success":
            n = _result_count(self.result, self.claims)
            return f"SUCCESS - {n} result{'' if n == 1 else 's'} found"
        if self.status == "error":
            return f"ERROR - {_one_line(self.error or 'unknown error')}"
        if self.status == "blocked":
            text = f"BLOCKED - {_one_line(self.error or 'not allowed')}"
            return text + " (requires approval)" if self.requires_approval else text
        if self.status == "needs_more_info":
            message = self.message or need_message(self.missing) or "more information needed"
            return f"NEEDS_MORE_INFO - {_one_line(message)}"
        options = "; ".join(f"{o.interpretation} ({o.would_select})" for o in self.clarification_options)
        return f"NEEDS_CLARIFICATION - {_one_line(options or self.message or 'no options')}"


def ttl_seconds(ttl: str) -> int:
    match = _TTL.match(ttl)
    if not match or int(match.group(1)) <= 0:
        raise ValueError(
            f"invalid ttl {ttl!r}: use a positive number of seconds (3600) or minutes, hours or days (30m, 24h, 7d)"
        )
    return int(match.group(1)) * _TTL_UNITS[match.group(2).lower()]


def with_query(args: dict[str, Any], *, mode: str, original_query: str | None) -> dict[str, Any]:
    """A result's ``workflow_args``: ``args`` with the mode the command runs
    in and the query it answers (004's shapes carry both on every answer).
    An argument of either name keeps its own value."""
    extra: dict[str, Any] = {"mode": mode}
    if original_query:
        extra["original_query"] = original_query
    return extra | args


def need_message(missing: list[str]) -> str:
    return f"Need {', '.join(missing)} to continue" if missing else ""


def _result_count(result: WorkflowOutcome | None, claims: list[SourcedClaim]) -> int:
    if result is not None and result.findings:
        return len(result.findings)
    return len(claims)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def shortened(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# runs/actions/command_results.py imports SourcedClaim as Claim: this alias goes when it imports it by its name.
Claim = SourcedClaim
