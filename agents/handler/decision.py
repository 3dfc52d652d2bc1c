"""Selection -> decision -> result: a selection checked against the catalog,
the mode and the workflow's inputs, and the errors a finished run reports."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.handler.catalog import CatalogEntry, check_mode, mode_refusal
from agents.handler.shapes import (
    ClarificationOption,
    CoordinatorResult,
    CoordinatorSelection,
    SourcedClaim,
    need_message,
    shortened,
)

MAX_CLARIFICATION_OPTIONS = 5

MISSING_SOURCES = "Missing source metadata in workflow results"
TIMED_OUT = "Workflow execution timed out"

_INTEGER = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "yes"}
_FALSE = {"false", "no"}


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


def decide(selection: CoordinatorSelection, entries: list[CatalogEntry], mode: str) -> Decision:
    """Check a selection against the catalog, the mode and the workflow's inputs."""
    check_mode(mode)
    catalog: dict[str, CatalogEntry] = {}
    for entry in entries:
        catalog.setdefault(entry.name, entry)
    name = selection.workflow_selected
    known = name if name in catalog else None

    def result_of(**fields: Any) -> CoordinatorResult:
        return CoordinatorResult(command_received=selection.command_received, workflow_selected=known, **fields)

    if selection.status != "selected":
        return Decision(entry=None, result=_unselected(selection, catalog, result_of))

    assert name is not None  # a "selected" selection always names one
    if known is None:
        return Decision(entry=None, result=result_of(status="error", error=f"Unknown workflow: {name}"))
    entry = catalog[name]
    error = mode_refusal(entry.name, entry.mode, mode)
    if error:
        return Decision(
            entry=None, result=result_of(workflow_args=selection.workflow_args, status="blocked", error=error)
        )
    return _with_inputs(selection, entry, result_of)


def _unselected(
    selection: CoordinatorSelection, catalog: dict[str, CatalogEntry], result_of: Callable[..., CoordinatorResult]
) -> CoordinatorResult:
    """What a selection that chose no workflow reports: clarification options
    only among workflows that exist (the catalog's first ones when the model
    offered none), and a message or error where it left them out."""
    options = [o for o in selection.clarification_options if o.would_select in catalog]
    if not options and selection.status == "needs_clarification":
        options = [
            ClarificationOption(interpretation=e.description or e.name, would_select=e.name)
            for e in list(catalog.values())[:MAX_CLARIFICATION_OPTIONS]
        ]
    message = selection.message
    if selection.status == "needs_more_info" and not message:
        message = need_message(selection.missing)
    error = selection.error
    if selection.status == "blocked" and not error:
        error = "Workflow not allowed in current mode"
    return result_of(
        workflow_args=selection.workflow_args,
        status=selection.status,
        missing=selection.missing,
        message=message,
        error=error,
        clarification_options=options,
    )


def _with_inputs(
    selection: CoordinatorSelection, entry: CatalogEntry, result_of: Callable[..., CoordinatorResult]
) -> Decision:
    """A run of ``entry`` with the selection's arguments typed and the
    defaults filled in, or the result saying which input is wrong or missing."""
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
            error = f"Invalid parameter {input_name}: expected {spec.type}, got {shortened(repr(value))}"
            result = result_of(workflow_args=selection.workflow_args, status="error", error=error)
            return Decision(entry=None, result=result)
    if missing:
        result = result_of(workflow_args=args, status="needs_more_info", missing=missing, message=need_message(missing))
        return Decision(entry=None, result=result)
    return Decision(entry=entry, args=args, requires_approval=entry.destructive)


def error_for_run(status: str, error: str) -> str:
    """The error a finished, failed run reports to the Executor."""
    text = (error or "").strip()
    lowered = text.lower()
    if "timeout" in lowered or "timed out" in lowered:
        return TIMED_OUT
    if any(word in lowered for word in ("connection", "network", "cannot be reached")):
        return f"Network error: {text}"
    return text or f"run ended {status}"


def claims_problem(claims: list[SourcedClaim]) -> str | None:
    """Why these claims cannot be reported as they are (one without a url or a source_ref), or None."""
    if any(claim.lacks_source() for claim in claims):
        return MISSING_SOURCES
    return None


def _coerce(value: Any, kind: str) -> Any:
    """``value`` as an input of type ``kind``; ValueError when it is not one."""
    if kind == "boolean":
        return _boolean(value)
    # bool is an int in Python, but not an integer, a number or a string here.
    if isinstance(value, bool):
        raise ValueError(kind)
    # A path is text here; runs.actions.catalog.check_inputs keeps it inside the workspace.
    if kind in ("string", "path") and isinstance(value, str | int | float):
        return value if isinstance(value, str) else str(value)
    if kind == "integer":
        return _integer(value)
    if kind == "number":
        return _number(value)
    raise ValueError(kind)


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("boolean")


def _integer(value: Any) -> int:
    """An int, a float with no fraction, or a string of digits, as an int."""
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.match(value.strip()):
        return int(value.strip())
    raise ValueError("integer")


def _number(value: Any) -> int | float:
    """A finite int or float, or a string of one (digits alone give an int)."""
    if isinstance(value, int | float) and math.isfinite(value):
        return value
    if isinstance(value, str):
        text = value.strip()
        if _INTEGER.match(text):
            return int(text)
        try:
            number = float(text)
        except ValueError:
            raise ValueError("number") from None
        if math.isfinite(number):
            return number
    raise ValueError("number")


def _list_value(items: list[Any]) -> str:
    """A list input's items as the run takes them: comma-separated, or a
    JSON list when an item has a comma of its own (agents.expansion reads both)."""
    texts = [_coerce(item, "string") for item in items]
    if any("," in text for text in texts):
        return json.dumps(texts, ensure_ascii=False)
    return ",".join(texts)
