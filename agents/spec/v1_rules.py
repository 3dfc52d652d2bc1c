"""The rules of zenflow's v1 language that zenweb's own checks do not
cover, checked when a workflow is parsed (never when a stored version is
read back): the version, agents' descriptions, the untilAgent judge's
``resultSchema``, what an include step may not have, forEach's own rules,
the named includes and CEL syntax. They take a WorkflowSpec or its lenient
stand-in, so they read optional attributes with ``getattr``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agents.spec.checks import include_path_problem
from agents.spec.expressions import expression_problems, walk_steps
from agents.spec.yaml_locations import Location

VERSION = 1
# Fields an include step may not have, as zenflow names them.
_NOT_WITH_INCLUDE = (("condition", "condition"), ("context_files", "contextFiles"))


def v1_problems(workflow: Any) -> Iterator[tuple[Location, str]]:
    version = getattr(workflow, "version", VERSION)
    if isinstance(version, int) and version != VERSION:
        yield ("version",), f"unknown version {version}: version {VERSION} (zenflow's v1) is the only one"
    for name, agent in workflow.agents.items():
        if not getattr(agent, "description", "x"):
            yield ("agents", name, "description"), "required field missing: say what the agent is for"
    includes = getattr(workflow, "includes", {})
    for name, path in includes.items():
        problem = include_path_problem(path) if isinstance(path, str) else None
        if problem:
            yield ("includes", name), problem
    for at, step in walk_steps(workflow.steps, ("steps",)):
        yield from _step_rules(step, at)
        if step.loop is not None and not getattr(step.loop, "broken", False):
            yield from _loop_rules(step.loop, (*at, "loop"), workflow)
    yield from expression_problems(workflow)


def _step_rules(step: Any, at: Location) -> Iterator[tuple[Location, str]]:
    if step.include is None:
        return
    for name, alias in _NOT_WITH_INCLUDE:
        if getattr(step, name, None):
            yield (*at, alias), f"an include step has no {alias}; the included workflow's steps carry theirs"


def _loop_rules(loop: Any, at: Location, workflow: Any) -> Iterator[tuple[Location, str]]:
    for_each = loop.for_each
    for i, inner in enumerate(loop.steps):
        inner_loop = None if getattr(inner, "broken", False) else inner.loop
        if inner_loop is None or getattr(inner_loop, "broken", False):
            continue
        if for_each is None and inner_loop.for_each is None:
            # zenflow prohibits every loop in a loop; zenweb runs forEach loops
            # in loops and loops in forEach loops, but no repeat in a repeat.
            yield (*at, "steps", i, "loop"), "nested loop: a repeat-until loop inside a repeat-until loop is prohibited"
    if for_each is not None and getattr(loop, "delay", None):
        yield (*at, "delay"), "delay belongs to repeat-until loops; a forEach loop runs once per item"
    if isinstance(for_each, list) and not for_each:
        yield (*at, "forEach"), "forEach gives no items: a forEach loop needs at least one"
    judge = loop.until_agent
    if for_each is None and isinstance(judge, str) and judge in workflow.agents:
        problem = _judge_schema_problem(getattr(workflow.agents[judge], "result_schema", None))
        if problem:
            yield (*at, "untilAgent"), f"the judge {judge!r} {problem}"


def _judge_schema_problem(schema: Any) -> str | None:
    """Why an untilAgent judge's resultSchema cannot say whether the loop is done, or None."""
    example = "resultSchema: {type: object, properties: {done: {type: boolean}}, required: [done]}"
    if not isinstance(schema, dict):
        return f"needs a resultSchema with a required boolean done ({example})"
    properties = schema.get("properties")
    done = properties.get("done") if isinstance(properties, dict) else None
    if not isinstance(done, dict):
        return f"needs properties.done in its resultSchema ({example})"
    if done.get("type") != "boolean":
        return f"needs properties.done of type boolean in its resultSchema ({example})"
    required = schema.get("required")
    if not isinstance(required, list) or "done" not in required:
        return f"needs done in its resultSchema's required list ({example})"
    return None
