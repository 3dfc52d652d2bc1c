"""zenflow's CEL fields, checked when a workflow is parsed: a step's
``condition``, a loop's ``until`` and a ``forEach`` that is an expression.
A syntax error is a problem; an expression that reads a variable no run
gives (``steps.run-tests``, a subtraction in CEL) is a warning.

``until`` is zenweb's text to look for in the last inner step's output, or
zenflow's CEL expression: it is CEL when it parses as CEL and reads one of
zenflow's variables (``content.contains('LGTM')``), or when it looks like
CEL but does not parse (an error). ``forEach`` text is the name of an input
when the workflow declares one of that name, else a CEL expression."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from agents import cel
from agents.spec.yaml_locations import Location

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LOOKS_LIKE_CEL = re.compile(r"\b(?:steps|content|result|status|iteration|item|index)\s*[.\[]|==|!=|&&|\|\||[()]")


def walk_steps(steps: Sequence[Any], at: Location) -> Iterator[tuple[Location, Any]]:
    """Every step of a workflow's own file with its location, loops' inner steps included."""
    for i, step in enumerate(steps):
        if getattr(step, "broken", False):
            continue
        yield (*at, i), step
        loop = step.loop
        if loop is not None and not getattr(loop, "broken", False):
            yield from walk_steps(loop.steps, (*at, i, "loop", "steps"))


def until_is_cel(text: str) -> bool:
    """Whether a loop's ``until`` is zenflow's CEL, not zenweb's text."""
    try:
        expression = cel.parse(text)
    except cel.CelError:
        return bool(_LOOKS_LIKE_CEL.search(text))
    return bool(expression.names & cel.VARIABLES)


def for_each_is_cel(value: object, inputs: Any) -> bool:
    """Whether a loop's ``forEach`` is a CEL expression (not an input's name, not a list)."""
    return isinstance(value, str) and value not in inputs and not _BARE_NAME.fullmatch(value)


def expression_problems(workflow: Any) -> Iterator[tuple[Location, str]]:
    """CEL syntax errors of conditions, CEL untils and forEach expressions."""
    for at, text in _expressions(workflow):
        problem = cel.syntax_problem(text)
        if problem:
            yield at, problem


def expression_warnings(workflow: Any) -> Iterator[tuple[Location, str]]:
    """Expressions that parse but read what no run gives."""
    for at, text in _expressions(workflow):
        try:
            hint = cel.name_hint(cel.parse(text))
        except cel.CelError:
            continue
        if hint:
            yield at, f"the expression {hint}"


def _expressions(workflow: Any) -> Iterator[tuple[Location, str]]:
    inputs = getattr(workflow, "inputs", {})
    for at, step in walk_steps(workflow.steps, ("steps",)):
        condition = getattr(step, "condition", None)
        if isinstance(condition, str) and condition:
            yield (*at, "condition"), condition
        loop = step.loop
        if loop is None or getattr(loop, "broken", False):
            continue
        if isinstance(loop.until, str) and loop.until and until_is_cel(loop.until):
            yield (*at, "loop", "until"), loop.until
        if for_each_is_cel(loop.for_each, inputs):
            yield (*at, "loop", "forEach"), loop.for_each
