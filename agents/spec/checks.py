"""Checks that span fields: references between steps, agents, inputs,
containers and tools, loops' and includes' rules, dependency cycles. They
take a WorkflowSpec or its lenient stand-in (``agents.spec.lenient``)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any, Literal

from agents.spec.errors import dotted
from agents.spec.expressions import for_each_is_cel
from agents.spec.fields import MAX_ITERATIONS, MAX_NESTING, MAX_STEPS
from agents.spec.usage import KnownTools, did_you_mean, mcp_tool_known
from agents.spec.yaml_locations import Location
from agents.tools.mcp.config import server_of


def reference_problems(workflow: Any, known_tools: KnownTools | None) -> Iterator[tuple[Location, str]]:
    """References between steps, agents, inputs, containers and tools: what
    the runtime relies on, checked for stored versions too."""
    yield from _steps_problems(workflow.steps, ("steps",), workflow, depth=0)
    coordinator = workflow.agents.get("coordinator")
    if not workflow.steps and "spawn_worker" not in (coordinator.tools if coordinator else []):
        yield ("steps",), "a workflow needs at least one step, unless its coordinator agent plans with spawn_worker"
    total = count_steps(workflow.steps)
    if total > MAX_STEPS and len(workflow.steps) <= MAX_STEPS:
        yield (
            ("steps",),
            f"{total} steps once loops and includes are counted; a workflow has at most {MAX_STEPS}",
        )

    if known_tools is not None:
        known = ", ".join(sorted(known_tools)) or "(none)"
        mcp = set(getattr(workflow, "mcp", None) or ())
        configured = sorted({server for tool in known_tools if (server := server_of(tool))})
        for j, server in enumerate(getattr(workflow, "mcp", None) or []):
            if server not in configured:
                yield (
                    ("mcp", j),
                    f"no MCP server {server!r} is configured (ZENWEB_MCP_SERVERS: {', '.join(configured) or 'none'})",
                )
        listed = [
            *(
                (("agents", name, "tools", j), tool)
                for name, agent in workflow.agents.items()
                for j, tool in enumerate(agent.tools)
            ),
            *((("approvals", j), tool) for j, tool in enumerate(getattr(workflow, "approvals", None) or [])),
        ]
        for at, tool in listed:
            server = server_of(tool)
            if server in configured and server not in mcp:
                # A run gets the tools of the servers its workflow names, no others.
                yield (
                    at,
                    f"{tool!r} is a tool of MCP server {server!r}, which this workflow does not name: add it to mcp:",
                )
            elif tool not in known_tools and not mcp_tool_known(tool, mcp, known_tools):
                yield at, _unknown_tool(tool, known, mcp, known_tools)


def _unknown_tool(tool: str, known: str, declared: Collection[str], known_tools: Collection[str]) -> str:
    server = server_of(tool)
    configured = sorted({*declared, *(s for t in known_tools if (s := server_of(t)))})
    if server is not None and server not in configured:
        servers = ", ".join(configured) or "none"
        return f"unknown tool {tool!r}: no MCP server {server!r} is configured (MCP servers: {servers})"
    return f"unknown tool {tool!r}; known tools: {known}"


def count_steps(steps: Iterable[Any]) -> int:
    """Steps that run an agent: a loop's inner steps once, included workflows in full."""
    total = 0
    for step in steps:
        if getattr(step, "broken", False):
            total += 1
        elif step.loop is not None:
            total += count_steps(getattr(step.loop, "steps", []))
        elif step.include is not None:
            total += count_steps(step.included.steps) if step.included is not None else 0
        else:
            total += 1
    return total


def _steps_problems(steps: Sequence[Any], at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    """Problems of one list of sibling steps (top-level, or a loop's inner steps)."""
    first_index: dict[str, int] = {}
    for i, step in enumerate(steps):
        if step.id == "coordinator":
            yield (*at, i, "id"), "step id 'coordinator' is reserved for the run's coordinator"
        if step.id in first_index:
            first = first_index[step.id]
            message = f"duplicate step id {step.id!r} (first used by {dotted(at)}[{first}])"
            yield (*at, i, "id"), message
        else:
            first_index[step.id] = i

    graph: dict[str, list[str]] = {}
    for i, step in enumerate(steps):
        yield from _step_problems(step, (*at, i), workflow, depth)
        for j, dep in enumerate(step.depends_on):
            if dep == step.id:
                yield (
                    (*at, i, "dependsOn", j),
                    f"step {dep!r} depends on itself",
                )
            elif dep not in first_index:
                yield (
                    (*at, i, "dependsOn", j),
                    f"unknown step {dep!r}{did_you_mean(dep, first_index)}",
                )
        if first_index[step.id] == i:
            graph[step.id] = [d for d in step.depends_on if d in first_index and d != step.id]

    for cycle in _cycles(graph):
        start, after = cycle[0], cycle[1]
        i = first_index[start]
        j = steps[i].depends_on.index(after)
        yield (
            (*at, i, "dependsOn", j),
            "dependency cycle: " + " -> ".join(cycle),
        )


def _step_problems(step: Any, at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    """Problems of one step's shape: plain or container, and its references."""
    if getattr(step, "broken", False):
        return
    defined_agents = ", ".join(sorted(workflow.agents))
    if step.loop is not None and step.include is not None:
        yield (*at, "include"), "a step has either loop or include, not both"
    container = "loop" if step.loop is not None else "include" if step.include is not None else None
    if container is not None:
        a_step = "a loop step" if container == "loop" else "an include step"
        holder = "its inner steps" if container == "loop" else "the included workflow's steps"
        if step.agent is not None:
            yield (*at, "agent"), f"{a_step} has no agent; {holder} name theirs"
        if step.instructions:
            yield (*at, "instructions"), f"{a_step} has no instructions; {holder} carry them"
        if getattr(step, "model", None):
            yield (*at, "model"), f"{a_step} has no model; {holder} or their agents name theirs"
    elif isinstance(step.agent, str) and step.agent not in workflow.agents:
        yield (*at, "agent"), f"unknown agent {step.agent!r}; defined agents: {defined_agents}"
    if step.with_ and step.include is None:
        yield (*at, "with"), "with gives inputs to an included workflow; this step has no include"
    if step.loop is not None:
        yield from _loop_problems(step.loop, (*at, "loop"), workflow, depth + 1)
    if step.include is not None:
        yield from _include_problems(step, at, workflow)


def _for_each_input_problem(name: str, inputs: Any) -> str | None:
    """Why the input a forEach loop names cannot give it items, or None."""
    declared = inputs.get(name)
    if declared is None:
        names = ", ".join(sorted(inputs))
        known = f"declared inputs: {names}" if names else "this workflow declares no inputs"
        return f"unknown input {name!r}{did_you_mean(name, inputs)}; {known}"
    if declared.type not in (None, "string"):
        return (
            f"input {name!r} is {declared.type}; forEach needs a string input (a JSON list or comma-separated values)"
        )
    return None


def _loop_problems(loop: Any, at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    if getattr(loop, "broken", False):
        return
    if depth > MAX_NESTING:
        yield at, f"containers nest at most {MAX_NESTING} deep"
    if loop.for_each is not None:
        for name, alias in (("max_iterations", "maxIterations"), ("until", "until"), ("until_agent", "untilAgent")):
            if getattr(loop, name) is not None:
                yield (*at, alias), f"{alias} belongs to repeat-until loops; a forEach loop runs once per item"
        # A list of its own is checked as the field's; a name must be a string
        # input; a CEL expression is checked with the other expressions.
        named = isinstance(loop.for_each, str) and not for_each_is_cel(loop.for_each, workflow.inputs)
        problem = _for_each_input_problem(loop.for_each, workflow.inputs) if named else None
        if problem:
            yield (*at, "forEach"), problem
    else:
        if loop.max_iterations is None:
            yield (
                (*at, "maxIterations"),
                f"required field missing: a repeat-until loop needs maxIterations (1 to {MAX_ITERATIONS})",
            )
        # With both, until is read first, then the judge is asked (zenflow's order).
        if isinstance(loop.until_agent, str) and loop.until_agent not in workflow.agents:
            defined = ", ".join(sorted(workflow.agents))
            yield (*at, "untilAgent"), f"unknown agent {loop.until_agent!r}; defined agents: {defined}"
        if loop.max_concurrency:  # 0, as zenflow writes it, is unset
            yield (
                (*at, "maxConcurrency"),
                "maxConcurrency applies to forEach loops; repeat-until iterations run one after another",
            )
        if loop.steps:
            # The last inner step's output ends the iteration: until looks at it,
            # the judge reads it, and the next iteration is given it.
            last = loop.steps[-1]
            where = (*at, "steps", len(loop.steps) - 1)
            if getattr(last, "broken", False):
                pass
            elif last.loop is not None or last.include is not None:
                yield where, "the last step of a repeat-until loop must run an agent: its output ends the iteration"
            elif any(last.id in step.depends_on for step in loop.steps):
                yield (
                    where,
                    "the last step of a repeat-until loop must be one no other inner step depends on: "
                    "its output ends the iteration",
                )
    yield from _steps_problems(loop.steps, (*at, "steps"), workflow, depth)


def include_path_problem(path: str) -> str | None:
    """Why an include path is not allowed, or None: it must be relative to the
    workflow's folder and stay inside it."""
    if not path.strip():
        return "include needs a file path"
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        return f"include path {path!r} is absolute; give a path relative to this workflow's folder"
    if ".." in re.split(r"[\\/]", path):
        return f"include path {path!r} leaves this workflow's folder ('..' is not allowed)"
    return None


def include_target(step_include: str, includes: Any) -> str:
    """The file an include step names: a name of the workflow's ``includes``
    (zenflow's named includes), else a path relative to the workflow's folder."""
    named = includes.get(step_include) if isinstance(includes, dict) else None
    return named if isinstance(named, str) else step_include


def _include_problems(step: Any, at: Location, workflow: Any) -> Iterator[tuple[Location, str]]:
    if not isinstance(step.include, str):
        return
    problem = include_path_problem(include_target(step.include, getattr(workflow, "includes", {})))
    if problem is not None:
        yield (*at, "include"), problem
    sub = step.included
    if sub is None:
        # The loader reports files it could not include; data validated
        # without the loader carries the included workflow with it.
        return
    takes = ", ".join(sorted(sub.inputs)) or "no inputs"
    for key in step.with_:
        if key not in sub.inputs:
            yield (*at, "with", key), f"unknown input {key!r} of {step.include} (it takes: {takes})"
    for name, declared in sub.inputs.items():
        if declared.required and declared.default is None and name not in step.with_:
            yield (*at, "include"), f"{step.include} needs input {name!r}: give it under with"
    for name, agent in sub.agents.items():
        mine = workflow.agents.get(name)
        if mine is None:
            yield (*at, "include"), f"agent {name!r} of {step.include} is missing from this workflow's agents"
        elif mine != agent:
            yield (
                (*at, "include"),
                f"agent {name!r} of {step.include} differs from this workflow's agent {name!r}; rename one of them",
            )


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each dependency cycle once, as a path from the step of the cycle that comes
    first in the file back to itself (``graph`` is in file order)."""
    position = {step_id: n for n, step_id in enumerate(graph)}
    state: dict[str, Literal["active", "done"]] = {}
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(step_id: str) -> None:
        state[step_id] = "active"
        path.append(step_id)
        for dep in graph[step_id]:
            if state.get(dep) == "active":
                cycle = path[path.index(dep) :]
                first = cycle.index(min(cycle, key=position.__getitem__))
                cycle = cycle[first:] + cycle[:first]
                cycles.append([*cycle, cycle[0]])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[step_id] = "done"

    for step_id in graph:
        if step_id not in state:
            visit(step_id)
    return cycles
