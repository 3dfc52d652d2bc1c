"""Workflow checks for what would otherwise only fail at run time: a tool an
agent lists that its role can never call, a script calling a tool its agent
lacks, a toolTimeouts or approvals entry no call can use, and ``$name`` in instructions
or in the coordinator's ``system`` that nothing substitutes. agents/spec/ runs them when a workflow is parsed
or registered (not when a stored version is read back)."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from string import Template
from typing import Any

from agents.router import COORDINATOR
from agents.spec.yaml_locations import Location
from agents.tools.base import Role
from agents.tools.mcp.config import server_of
from agents.tools.registry import DEFAULTS

# What a step's instructions may say as $name besides the workflow's inputs:
# every step's, and those of the loop it runs in (agents.expansion, runs/actions/steps.py).
STEP_VARIABLES = frozenset({"step", "inbox"})
LOOP_VARIABLES = {"repeat": frozenset({"iteration", "previous_output"}), "forEach": frozenset({"item", "index"})}

# The tools a validator knows: their names, or each name with the roles that
# may call it (``coordinator``, ``step``), which also checks who lists it.
KnownTools = Collection[str] | Mapping[str, Collection[Role]]


def mcp_tool_known(tool: str, declared: Collection[str], known_tools: Collection[str]) -> bool:
    """``<server>__<tool>`` of a configured server this workflow names, or of a
    configured server that could not be listed (``<server>__*`` in
    ``known_tools``): its tools are only known once zenweb connects, and a
    name the server does not offer fails the call with the server's list."""
    server = server_of(tool)
    return server is not None and (server in declared or f"{server}__*" in known_tools)


def tool_use_problems(workflow: Any, known_tools: KnownTools | None) -> Iterator[tuple[Location, str]]:
    """Tools an agent lists that its role can never call, script calls of tools
    the agent does not have, and toolTimeouts or approvals that no call can use."""
    in_steps = set(_step_agents(workflow.steps))
    roles = {name: _agent_roles(name, in_steps) for name in workflow.agents}
    coordinator = workflow.agents.get(COORDINATOR)
    spawns = coordinator is not None and "spawn_worker" in coordinator.tools
    mcp = set(getattr(workflow, "mcp", None) or ())
    if isinstance(known_tools, Mapping):
        for name, agent in workflow.agents.items():
            for j, tool in enumerate(agent.tools):
                allowed = known_tools.get(tool)
                if allowed is not None and not roles[name] & set(allowed):
                    yield ("agents", name, "tools", j), _wrong_role(tool, name, roles[name], allowed)

    for name, agent in workflow.agents.items():
        if getattr(agent, "provider", None) == "openai":
            continue  # its script is never played
        if spawns and name != COORDINATOR and name not in in_steps:
            continue  # only a worker: spawn_worker may give it tools it does not list
        listed = list(dict.fromkeys(agent.tools))
        given = sorted({tool for role in roles[name] for tool in DEFAULTS[role]} - set(listed))
        if getattr(agent, "result_schema", None) is not None:
            given.append("submit_result")  # zenflow's: a structured result (an untilAgent judge's)
        for i, turn in enumerate(getattr(agent, "script", None) or []):
            for j, call in enumerate(turn.calls or []):
                # (A lenient stand-in's call whose tool is not text has None.)
                if call.tool is not None and call.tool not in listed and call.tool not in given:
                    yield (
                        ("agents", name, "script", i, "calls", j, "tool"),
                        f"script turn {i + 1} calls {call.tool!r}, which agent {name!r} does not list in tools "
                        f"({_its_tools(listed, given, roles[name])})",
                    )

    options = getattr(workflow, "options", None)
    listed_anywhere = {tool for agent in workflow.agents.values() for tool in agent.tools}
    timeouts = getattr(options, "tool_timeouts", None) or {}
    named: list[tuple[tuple[str | int, ...], Any, str]] = [
        (("options", "toolTimeouts", tool), tool, "timeout") for tool in timeouts
    ]
    named += [(("approvals", i), tool, "approval") for i, tool in enumerate(getattr(workflow, "approvals", None) or [])]
    for at, tool, what in named:
        if tool in listed_anywhere:
            continue
        if not spawns:
            tools = ", ".join(sorted(listed_anywhere)) or "none"
            yield (
                at,
                f"no agent lists tool {tool!r}, so this {what} applies to no call"
                f"{did_you_mean(tool, listed_anywhere)}; the agents' tools: {tools}",
            )
        elif known_tools is not None and tool not in known_tools and not mcp_tool_known(tool, mcp, known_tools):
            # The coordinator may give a worker any tool, so only an unknown one is wrong.
            yield at, f"unknown tool {tool!r}{did_you_mean(tool, known_tools)}"


def _step_agents(steps: Iterable[Any]) -> Iterator[str]:
    """The agents that run steps: plain steps, inner steps of loops, and the
    steps of included workflows."""
    for step in steps:
        if isinstance(step.agent, str):
            yield step.agent
        if step.loop is not None:
            yield from _step_agents(getattr(step.loop, "steps", []))
        if step.included is not None:
            yield from _step_agents(step.included.steps)


def _agent_roles(name: str, in_steps: Collection[str]) -> frozenset[Role]:
    """The roles an agent runs in: the agent named coordinator coordinates
    (and runs steps too if a step names it); every other agent runs steps,
    named by steps or spawned as a worker."""
    if name != COORDINATOR:
        return frozenset({"step"})
    return frozenset({"coordinator", "step"}) if name in in_steps else frozenset({"coordinator"})


def _wrong_role(tool: str, agent: str, roles: Collection[Role], allowed: Collection[Role]) -> str:
    if not allowed:
        return f"tool {tool!r} is available to no agent"
    if "coordinator" in roles:
        return (
            f"tool {tool!r} is only available to steps, and agent {agent!r} is the run's coordinator; "
            "list it on an agent that runs steps"
        )
    return (
        f"tool {tool!r} is only available to the coordinator (the agent named {COORDINATOR!r}), "
        f"and agent {agent!r} runs steps"
    )


def _its_tools(listed: Sequence[str], given: Sequence[str], roles: Collection[Role]) -> str:
    text = f"its tools: {', '.join(listed) or 'none'}"
    if given:
        who = "the coordinator" if "coordinator" in roles else "every step"
        text += f"; {who} also has {', '.join(given)}"
    return text


def placeholder_problems(
    steps: Sequence[Any], at: Location, variables: frozenset[str]
) -> Iterator[tuple[Location, str]]:
    """``$name`` in instructions that nothing substitutes: not an input, not a
    step's variable, not one of the enclosing loops'. Text such as ``$1000``
    is no placeholder (``string.Template`` leaves it), ``$$`` is a literal
    ``$``, and an all-capitals name (``$HOME``) is taken as meant literally:
    inputs and variables are lowercase, so it could never be substituted."""
    for i, step in enumerate(steps):
        if getattr(step, "broken", False):
            continue
        unknown = [
            name
            for name in Template(step.instructions).get_identifiers()
            if name not in variables and any(c.islower() for c in name)
        ]
        for name in unknown:
            choices = sorted(f"${v}" for v in variables)
            loop_kind = next((kind for kind, names in LOOP_VARIABLES.items() if name in names), None)
            if loop_kind is not None:
                why = f" (it is set only inside a {'forEach' if loop_kind == 'forEach' else 'repeat-until'} loop)"
            else:
                why = did_you_mean(f"${name}", choices)
            yield (
                (*at, i, "instructions"),
                f"'${name}' is neither an input nor a variable zenweb provides here{why}; "
                f"instructions here may use {', '.join(choices)} (write $$ for a literal $)",
            )
        loop = step.loop
        if loop is not None and not getattr(loop, "broken", False):
            inner = variables | LOOP_VARIABLES[loop.kind]
            yield from placeholder_problems(loop.steps, (*at, i, "loop", "steps"), inner)


def coordinator_prompt_problems(agents: Mapping[str, Any], inputs: frozenset[str]) -> Iterator[tuple[Location, str]]:
    """``$name`` in the coordinator agent's ``system`` that is not an input:
    its prompt is rendered with the run's inputs (``agents.coordinator_prompts``),
    as a step's instructions are, and nothing else."""
    agent = agents.get(COORDINATOR)
    system = getattr(agent, "system", None)
    if not isinstance(system, str):
        return
    choices = sorted(f"${name}" for name in inputs)
    for name in Template(system).get_identifiers():
        if name in inputs or not any(c.islower() for c in name):
            continue
        allowed = f"it may use {', '.join(choices)}" if choices else "this workflow has no inputs"
        yield (
            ("agents", COORDINATOR, "system"),
            f"'${name}' is not an input of this workflow{did_you_mean(f'${name}', choices)}; the coordinator's "
            f"system prompt is rendered with the run's inputs only: {allowed} (write $$ for a literal $)",
        )


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""
