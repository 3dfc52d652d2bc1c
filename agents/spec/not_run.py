"""What zenweb accepts of zenflow's language but does not run yet, and
warnings about what it reads differently. Validation reports each as a
warning with its line; a run of a workflow that uses what is not run yet is
refused when it is asked for (``not_run_refusal``), never started with the
field silently ignored."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from agents.spec.checks import include_target
from agents.spec.errors import SpecProblem, dotted
from agents.spec.expressions import expression_warnings, for_each_is_cel, walk_steps
from agents.spec.shorthands import file_reference, loop_own_step
from agents.spec.workflow import WorkflowSpec
from agents.spec.yaml_locations import Location, line_for, parse_with_locations

NOT_RUN = "accepted; not run by zenweb yet"
_ISOLATION = ("", "none")


def not_run(spec: WorkflowSpec) -> Iterator[tuple[Location, str]]:
    """Every field of ``spec`` zenweb accepts but does not run, with why."""
    yield from _options_not_run(spec)
    yield from _agents_not_run(spec)
    for at, step in walk_steps(spec.steps, ("steps",)):
        yield from _step_not_run(step, at, spec)


def _options_not_run(spec: WorkflowSpec) -> Iterator[tuple[Location, str]]:
    options = spec.options
    if options.isolation not in _ISOLATION:
        yield ("options", "isolation"), f"{NOT_RUN}: isolation {options.isolation!r} (every run has one workspace)"


def _agents_not_run(spec: WorkflowSpec) -> Iterator[tuple[Location, str]]:
    judges = {s.loop.until_agent for _, s in walk_steps(spec.steps, ("steps",)) if s.loop and s.loop.until_agent}
    for name, agent in spec.agents.items():
        if agent.result_schema is not None and name not in judges:
            yield ("agents", name, "resultSchema"), f"{NOT_RUN}: a structured result (submit_result)"
        reference = file_reference(agent.system)
        if reference:
            yield ("agents", name, "prompt"), f"{NOT_RUN}: the prompt file {reference} was not found in the folder"


def _step_not_run(step: Any, at: Location, spec: WorkflowSpec) -> Iterator[tuple[Location, str]]:
    if step.retries and (step.loop is not None or step.include is not None):
        yield (*at, "retries"), f"{NOT_RUN}: retries of a loop or an include (a step's retries run)"
    if step.timeout is not None and (step.loop is not None or step.include is not None):
        yield (*at, "timeout"), f"{NOT_RUN}: a timeout of a loop or an include (a step's own timeout runs)"
    unread = [path for path in step.context_files if path not in step.context_file_texts]
    if unread:
        yield (*at, "contextFiles"), f"{NOT_RUN}: contextFiles not found in the workflow's folder: {', '.join(unread)}"
    reference = file_reference(step.instructions)
    if reference:
        yield (*at, "instructions"), f"{NOT_RUN}: the instructions file {reference} was not found in the folder"
    if step.include is not None and step.included is None:
        target = include_target(step.include, spec.includes)
        yield (*at, "include"), f"{NOT_RUN}: the included file {target} was not found"
    if step.loop is not None:
        yield from _loop_not_run(step.loop, (*at, "loop"), spec)


def _loop_not_run(loop: Any, at: Location, spec: WorkflowSpec) -> Iterator[tuple[Location, str]]:
    if for_each_is_cel(loop.for_each, spec.inputs):
        yield (*at, "forEach"), f"{NOT_RUN}: forEach as a CEL expression (an input's name or a list runs)"


def workflow_warnings(spec: WorkflowSpec, text: str, source: str) -> list[SpecProblem]:
    """The warnings of a valid workflow, with their lines in ``text``:
    what is not run yet, and expressions that read what no run gives."""
    lines = _lines(text)
    found = [*not_run(spec), *expression_warnings(spec)]
    warnings = [SpecProblem(source, line_for(lines, loc), dotted(loc), f"warning: {message}") for loc, message in found]
    return sorted(warnings, key=lambda w: w.line or 0)


def not_run_refusal(spec: WorkflowSpec, text: str, source: str) -> str | None:
    """Why a run of ``spec`` cannot start: each field it uses that zenweb
    does not run yet, with its step and line. None: nothing such."""
    found = list(not_run(spec))
    if not found:
        return None
    lines = _lines(text)
    parts = []
    for loc, message in found:
        line = line_for(lines, loc)
        step = _step_id(spec, loc)
        where = ", ".join(p for p in (f"step {step}" if step else "", f"line {line}" if line else "") if p)
        parts.append(f"{dotted(loc)} ({where}): {message.removeprefix(NOT_RUN + ': ')}" if where else dotted(loc))
    return f"{source} uses what zenweb does not run yet, so no run starts: " + "; ".join(parts)


def _step_id(spec: WorkflowSpec, loc: Location) -> str | None:
    """The id of the innermost step ``loc`` is in, or None."""
    found = None
    node: Any = spec
    for part in loc:
        try:
            node = node[part] if isinstance(part, int) else getattr(node, _attribute(part))
        except (AttributeError, IndexError, KeyError, TypeError):
            break
        if isinstance(part, int) and hasattr(node, "depends_on"):
            found = node.id
    return found


def _attribute(part: str) -> str:
    return {"loop": "loop", "steps": "steps"}.get(part, part)


def _lines(text: str) -> dict[Location, int]:
    """The lines of ``text``'s locations, those of single-step loops' inner steps included."""
    try:
        data, lines = parse_with_locations(text)
    except (yaml.YAMLError, ValueError, RecursionError):
        return {}
    if isinstance(data, dict):
        loop_own_step(data, lines)
    return lines
