"""The workflow handler (seed 004): a command in plain words becomes one workflow run.

The Executor says what it wants ("Run research workflow for laptops under $1000");
the handler shows a model the workflow catalog and asks for a COORDINATOR_SELECTION
(``selection_request``, ``parse_selection``), then checks that selection against the
catalog, the current mode and the workflow's inputs (``decide``). Whatever the run
or the check produced comes back as a COORDINATOR_RESULT, which the Orchestrator
appends to the Executor's notes with ``CoordinatorResult.to_markdown``.

The model only proposes: a workflow it invents, a code-mode workflow in chat mode,
or arguments of the wrong type never start a run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agents.llm import tokens
from agents.llm.base import CompletionRequest
from agents.spec import InputSpec, WorkflowSpec

AGENT = "workflow_handler"
# The REFLEX role of the seed: selection is classification, not writing.
TEMPERATURE = 0.4
DEFAULT_BUDGET_TOKENS = 2500
MAX_CLARIFICATION_OPTIONS = 5
MODES = ("chat", "code")

SelectionStatus = Literal["selected", "needs_more_info", "needs_clarification", "blocked"]
ResultStatus = Literal["success", "error", "blocked", "needs_more_info", "needs_clarification"]

MISSING_SOURCES = "Missing source metadata in workflow results"
TIMED_OUT = "Workflow execution timed out"

_TTL = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$", re.I)
_TTL_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```", re.S | re.I)
_INTEGER = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


class SelectionError(ValueError):
    """The model's answer is not a usable COORDINATOR_SELECTION; the message says why."""


class _Shape(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    def to_data(self) -> dict[str, Any]:
        """JSON-ready data with ``_type`` spelled as in the seed."""
        return self.model_dump(mode="json", by_alias=True)


class ClarificationOption(_Shape):
    interpretation: str
    would_select: str


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

    @model_validator(mode="before")
    @classmethod
    def _null_means_empty(cls, data: Any) -> Any:
        # Models write "missing": null as often as they leave it out.
        if isinstance(data, dict):
            empty = {"workflow_args": {}, "missing": [], "clarification_options": []}
            data = {k: (empty[k] if k in empty and v is None else v) for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _selected_names_a_workflow(self) -> CoordinatorSelection:
        if self.status == "selected" and not self.workflow_selected:
            raise ValueError("field 'workflow_selected': required when status is 'selected'")
        return self


class Claim(_Shape):
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
        """True when the claim cannot be traced: no url or no source_ref (seed §7.5)."""
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
    result: Any = None
    claims: list[Claim] = Field(default_factory=list)
    tool_runs: list[ToolRun] = Field(default_factory=list)
    error: str | None = None
    requires_approval: bool = False
    requires_retry: bool = False
    missing: list[str] = Field(default_factory=list)
    message: str | None = None
    clarification_options: list[ClarificationOption] = Field(default_factory=list)

    def to_markdown(self, iteration: int) -> str:
        """The "Executor Iteration" section of seed §8, with a claims table."""
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
            summary = ", ".join(f"{k}={_short(json.dumps(v, ensure_ascii=False))}" for k, v in args.items())
            return f"{self.workflow_selected} → {_one_line(summary)}"
        return self.workflow_selected

    def _result_line(self) -> str:
        if self.status == "success":
            n = _result_count(self.result, self.claims)
            return f"SUCCESS - {n} result{'' if n == 1 else 's'} found"
        if self.status == "error":
            return f"ERROR - {_one_line(self.error or 'unknown error')}"
        if self.status == "blocked":
            text = f"BLOCKED - {_one_line(self.error or 'not allowed')}"
            return text + " (requires approval)" if self.requires_approval else text
        if self.status == "needs_more_info":
            message = self.message or _need_message(self.missing) or "more information needed"
            return f"NEEDS_MORE_INFO - {_one_line(message)}"
        options = "; ".join(f"{o.interpretation} ({o.would_select})" for o in self.clarification_options)
        return f"NEEDS_CLARIFICATION - {_one_line(options or self.message or 'no options')}"


@dataclass(frozen=True)
class CatalogEntry:
    """What the handler's model is told about one workflow."""

    name: str
    description: str = ""
    triggers: tuple[str, ...] = ()
    inputs: dict[str, InputSpec] = field(default_factory=dict, hash=False)
    mode: str = "chat"
    destructive: bool = False
    outputs: tuple[str, ...] = ()
    # Text inputs a forEach loop iterates: their value is a list of items.
    list_inputs: frozenset[str] = frozenset()

    @classmethod
    def of(cls, spec: WorkflowSpec) -> CatalogEntry:
        return cls(
            name=spec.name,
            description=spec.description,
            triggers=tuple(spec.triggers),
            inputs=dict(spec.inputs),
            mode=spec.mode,
            destructive=spec.destructive,
            outputs=tuple(spec.outputs),
            list_inputs=frozenset(_for_each_inputs(spec.steps)) & set(spec.inputs),
        )

    def as_prompt_data(self, compact: bool = False) -> dict[str, Any]:
        """JSON-ready data for the prompt; ``compact`` leaves out descriptions and outputs."""
        inputs: dict[str, Any] = {}
        for name, spec in self.inputs.items():
            data: dict[str, Any] = {"type": spec.type, "required": spec.required}
            if name in self.list_inputs:
                data["list"] = True
            if spec.default is not None or not compact:
                data["default"] = spec.default
            if not compact:
                data["description"] = spec.description
            inputs[name] = data
        entry: dict[str, Any] = {"name": self.name}
        if not compact:
            entry["description"] = self.description
        entry |= {"triggers": list(self.triggers), "inputs": inputs, "mode": self.mode, "destructive": self.destructive}
        if not compact:
            entry["outputs"] = list(self.outputs)
        return entry


@dataclass(frozen=True)
class Decision:
    """The checked outcome of a selection: a run to start, or a result to report.

    Exactly one of ``entry`` and ``result`` is set. With ``entry``, ``args`` are the
    workflow's inputs (typed, defaults filled); ``requires_approval`` means the run
    waits for a person (the caller creates the approval).
    """

    entry: CatalogEntry | None
    args: dict[str, Any] = field(default_factory=dict)
    result: CoordinatorResult | None = None
    requires_approval: bool = False

    def __post_init__(self) -> None:
        if (self.entry is None) == (self.result is None):
            raise ValueError("a decision has either an entry to run or a result to report")


_SYSTEM = """\
You are the workflow handler. You translate one command, written in plain words, \
into the selection of one workflow from the catalog in the user message.

Rules:
- Select only a workflow whose name is in the catalog. Never invent a workflow and never answer with a tool name.
- Match the command against each workflow's name, triggers and description.
- Put the workflow's inputs in "workflow_args", taking the values from the command and giving each the \
input's type (string, integer, number, boolean, or path: text); an input with "list": true takes a JSON list \
of strings ("eu and us" is ["eu", "us"]). Never guess a value the command does not give, and never add to what it says.
- The current mode is {mode}. A workflow with "mode": "code" runs only in code mode.
- A workflow with "destructive": true may be selected as usual: a person approves it before it runs.

Statuses:
- "selected": one workflow clearly fits and every required input has a value.
- "needs_more_info": one workflow fits but required inputs have no value; list them in "missing" \
and say what you need in "message".
- "needs_clarification": several workflows could fit, or none does; give "clarification_options", \
each {{"interpretation": "<what the command might mean>", "would_select": "<catalog name>"}}. \
Also when one workflow fits but the command's value for an input is unclear ("eu or us", "all regions"): \
name that input in "missing" and ask in "message".
- "blocked": the workflow is not allowed in the current mode; in chat mode a code-mode workflow gets \
"error": "<workflow> workflow requires code mode - currently in chat mode".

Answer with ONLY one JSON object and nothing else:
{{"_type": "COORDINATOR_SELECTION", "command_received": "<the command>", "workflow_selected": "<name or null>", \
"workflow_args": {{}}, "status": "<status>", "missing": [], "message": null, "error": null, \
"clarification_options": []}}"""


@dataclass(frozen=True)
class SelectionPlan:
    """The selection request for one command, and what its prompt costs.

    ``full_tokens`` is the prompt with the full catalog; when that is past
    ``budget_tokens`` the compact catalog is sent (``compacted``) and
    ``sent_tokens`` is what that prompt costs.
    """

    request: CompletionRequest
    compacted: bool
    full_tokens: int
    sent_tokens: int
    budget_tokens: int

    def event_data(self) -> dict[str, Any]:
        """The data of the ``catalog_compacted`` event."""
        return {
            "agent": AGENT,
            "full_tokens": self.full_tokens,
            "compact_tokens": self.sent_tokens,
            "budget_tokens": self.budget_tokens,
            "over_budget": self.sent_tokens > self.budget_tokens,
        }


def plan_selection(
    command: str,
    entries: list[CatalogEntry],
    mode: str,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    model: str | None = None,
) -> SelectionPlan:
    """The request that asks a model to pick a workflow for ``command``.

    The prompt is counted with ``model``'s encoding (``agents.llm.tokens``);
    when the full catalog would push it past ``budget_tokens``, the compact
    catalog (no descriptions, no outputs) is sent instead. A compact prompt
    may still be over budget: every workflow stays selectable.
    """
    _check_mode(mode)
    system = _SYSTEM.format(mode=mode)
    full_catalog = _catalog_json(entries, compact=False)
    messages = _selection_messages(system, _user_message(command, mode, full_catalog))
    full_tokens = sent_tokens = tokens.count_messages(messages, model)
    compacted = full_tokens > budget_tokens
    if compacted:
        messages = _selection_messages(system, _user_message(command, mode, _catalog_json(entries, compact=True)))
        sent_tokens = tokens.count_messages(messages, model)
    request = CompletionRequest(
        agent=AGENT,
        messages=messages,
        model=model,
        temperature=TEMPERATURE,
        variables={"command": command, "mode": mode, "catalog_json": full_catalog},
    )
    return SelectionPlan(request, compacted, full_tokens, sent_tokens, budget_tokens)


def selection_request(
    command: str,
    entries: list[CatalogEntry],
    mode: str,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
) -> tuple[CompletionRequest, bool]:
    """``plan_selection``'s request and whether the catalog was compacted."""
    plan = plan_selection(command, entries, mode, budget_tokens=budget_tokens)
    return plan.request, plan.compacted


def parse_selection(text: str | None, command: str) -> CoordinatorSelection:
    """Read the model's answer: one JSON object, bare or in a ```json fence.

    ``command_received`` is always ``command``: the handler knows what it was
    sent better than the model's echo of it. Raises ``SelectionError``.
    """
    raw = (text or "").strip()
    fenced = _FENCE.search(raw)
    body = fenced.group(1).strip() if fenced else raw
    try:
        data = json.loads(body)
    except ValueError:
        snippet = raw[:200] + ("..." if len(raw) > 200 else "") if raw else "(empty answer)"
        raise SelectionError(f"the model did not answer JSON: {snippet}") from None
    if not isinstance(data, dict):
        raise SelectionError(f"the model answered JSON {_json_kind(data)}, not an object")
    data["command_received"] = command
    try:
        return CoordinatorSelection.model_validate(data)
    except ValidationError as exc:
        raise SelectionError(f"invalid COORDINATOR_SELECTION: {_problems(exc)}") from None


def mode_refusal(workflow: str, needs: str, mode: str) -> str | None:
    """Why a workflow that needs ``needs`` mode may not run in ``mode``, or
    None: a code-mode workflow changes files, and chat mode never may."""
    if needs == "code" and mode == "chat":
        return f"{workflow} workflow requires code mode - currently in chat mode"
    return None


def decide(selection: CoordinatorSelection, entries: list[CatalogEntry], mode: str) -> Decision:
    """Check a selection against the catalog, the mode and the workflow's inputs (seed §6, §10)."""
    _check_mode(mode)
    catalog: dict[str, CatalogEntry] = {}
    for entry in entries:
        catalog.setdefault(entry.name, entry)
    name = selection.workflow_selected
    known = name if name in catalog else None
    base = {"command_received": selection.command_received, "workflow_selected": known}

    if selection.status != "selected":
        options = [o for o in selection.clarification_options if o.would_select in catalog]
        if not options and selection.status == "needs_clarification":
            options = [
                ClarificationOption(interpretation=e.description or e.name, would_select=e.name)
                for e in list(catalog.values())[:MAX_CLARIFICATION_OPTIONS]
            ]
        message = selection.message
        if selection.status == "needs_more_info" and not message:
            message = _need_message(selection.missing)
        error = selection.error
        if selection.status == "blocked" and not error:
            error = "Workflow not allowed in current mode"
        result = CoordinatorResult(
            **base,
            workflow_args=selection.workflow_args,
            status=selection.status,
            missing=selection.missing,
            message=message,
            error=error,
            clarification_options=options,
        )
        return Decision(entry=None, result=result)

    assert name is not None  # a "selected" selection always names one
    if known is None:
        return Decision(entry=None, result=CoordinatorResult(**base, status="error", error=f"Unknown workflow: {name}"))
    entry = catalog[name]
    error = mode_refusal(entry.name, entry.mode, mode)
    if error:
        return Decision(entry=None, result=CoordinatorResult(**base, status="blocked", error=error))

    args: dict[str, Any] = {}
    missing: list[str] = []
    for input_name, spec in entry.inputs.items():
        value = selection.workflow_args.get(input_name)
        if value is None or (isinstance(value, str) and not value.strip()):
            if spec.default is not None:
                args[input_name] = spec.default
            elif spec.required:
                missing.append(input_name)
            continue
        try:
            if input_name in entry.list_inputs and isinstance(value, list):
                args[input_name] = _list_value(value)
            else:
                args[input_name] = _coerce(value, spec.type)
        except ValueError:
            error = f"Invalid parameter {input_name}: expected {spec.type}, got {_short(repr(value))}"
            result = CoordinatorResult(**base, workflow_args=selection.workflow_args, status="error", error=error)
            return Decision(entry=None, result=result)
    if missing:
        result = CoordinatorResult(
            **base, workflow_args=args, status="needs_more_info", missing=missing, message=_need_message(missing)
        )
        return Decision(entry=None, result=result)
    return Decision(entry=entry, args=args, requires_approval=entry.destructive)


def error_for_run(status: str, error: str) -> str:
    """The error a finished, failed run reports to the Executor (seed §10.1)."""
    text = (error or "").strip()
    lowered = text.lower()
    if "timeout" in lowered or "timed out" in lowered:
        return TIMED_OUT
    if any(word in lowered for word in ("connection", "network", "cannot be reached")):
        return f"Network error: {text}"
    return text or f"run ended {status}"


def claims_problem(claims: list[Claim]) -> str | None:
    """Why these claims cannot be reported as they are (seed §7.5), or None."""
    if any(claim.lacks_source() for claim in claims):
        return MISSING_SOURCES
    return None


def ttl_seconds(ttl: str) -> int:
    match = _TTL.match(ttl)
    if not match or int(match.group(1)) <= 0:
        raise ValueError(
            f"invalid ttl {ttl!r}: use a positive number of seconds (3600) or minutes, hours or days (30m, 24h, 7d)"
        )
    return int(match.group(1)) * _TTL_UNITS[match.group(2).lower()]


def _coerce(value: Any, kind: str) -> Any:
    """``value`` as an input of type ``kind``; ValueError when it is not one."""
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(kind)
    # bool is an int in Python, but not an integer, a number or a string here.
    if isinstance(value, bool):
        raise ValueError(kind)
    # A path is text here; runs.actions.catalog.check_inputs keeps it inside the workspace.
    if kind in ("string", "path"):
        if isinstance(value, str):
            return value
        if isinstance(value, int | float):
            return str(value)
    elif kind == "integer":
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INTEGER.match(value.strip()):
            return int(value.strip())
    elif kind == "number":
        if isinstance(value, int | float) and math.isfinite(value):
            return value
        if isinstance(value, str):
            text = value.strip()
            if _INTEGER.match(text):
                return int(text)
            try:
                number = float(text)
            except ValueError:
                pass
            else:
                if math.isfinite(number):
                    return number
    raise ValueError(kind)


def _list_value(items: list[Any]) -> str:
    """A list input's items as the run takes them: comma-separated, or a
    JSON list when an item has a comma of its own (agents.scheduler reads both)."""
    texts = [_coerce(item, "string") for item in items]
    if any("," in text for text in texts):
        return json.dumps(texts, ensure_ascii=False)
    return ",".join(texts)


def _for_each_inputs(steps: list[Any]) -> Iterator[str]:
    for step in steps:
        if step.loop is not None:
            if step.loop.for_each is not None:
                yield step.loop.for_each
            yield from _for_each_inputs(step.loop.steps)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: expected chat or code")


def _catalog_json(entries: list[CatalogEntry], *, compact: bool) -> str:
    data = [entry.as_prompt_data(compact) for entry in entries]
    if compact:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(data, ensure_ascii=False)


def _selection_messages(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _user_message(command: str, mode: str, catalog_json: str) -> str:
    return f"Workflow catalog (JSON):\n{catalog_json}\n\nCurrent mode: {mode}\n\nCommand:\n{command}"


def _problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        loc = ".".join(str(part) for part in error["loc"])
        problems.append(f"field {loc!r}: {message}" if loc else message)
    return "; ".join(problems)


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return kinds.get(type(value), "null")


def _need_message(missing: list[str]) -> str:
    return f"Need {', '.join(missing)} to continue" if missing else ""


def _result_count(result: Any, claims: list[Claim]) -> int:
    if isinstance(result, dict) and isinstance(result.get("findings"), list):
        return len(result["findings"])
    if isinstance(result, list):
        return len(result)
    return len(claims)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
