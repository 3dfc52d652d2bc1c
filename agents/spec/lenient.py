"""The well-typed parts of raw workflow data, for the cross-field checks
when field validation failed, so that one run reports every problem."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from agents.spec.inputs import INPUT_TYPES

_BROKEN = object()


def lenient(data: dict[str, Any]) -> SimpleNamespace:
    """The well-typed parts of raw workflow data, shaped like a WorkflowSpec
    for ``WorkflowSpec._problems``. Parts that field validation already
    reported are marked ``broken`` and not checked again."""

    raw_agents = _mapping(data.get("agents"))
    agents = {
        name: SimpleNamespace(
            tools=_strings(agent.get("tools") if isinstance(agent, dict) else None),
            provider=agent.get("provider") if isinstance(agent, dict) else None,
            script=_lenient_script(agent.get("script") if isinstance(agent, dict) else None),
            description=agent.get("description", "") if isinstance(agent, dict) else "x",
            result_schema=agent.get("resultSchema") if isinstance(agent, dict) else None,
        )
        for name, agent in raw_agents.items()
        if isinstance(name, str)  # another key's problem is field validation's to report
    }
    raw_inputs = _mapping(data.get("inputs"))
    inputs = {
        name: SimpleNamespace(type=_input_type(declared), required=False, default=None)
        for name, declared in raw_inputs.items()
        if isinstance(name, str)
    }
    mcp = _strings(data.get("mcp"))
    raw_options = _mapping(data.get("options"))
    timeouts = raw_options.get("toolTimeouts")
    options = SimpleNamespace(
        tool_timeouts=[t for t in timeouts if isinstance(t, str)] if isinstance(timeouts, dict) else []
    )
    return SimpleNamespace(
        steps=_lenient_steps(data.get("steps")),
        agents=agents,
        inputs=inputs,
        mcp=mcp,
        options=options,
        version=data.get("version", 1),
        includes=_mapping(data.get("includes")),
    )


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _lenient_script(raw_script: object) -> list[SimpleNamespace]:
    """Script turns with the tool names of their calls; None stands for a
    tool that is not text (field validation reports it)."""
    turns = []
    for turn in raw_script if isinstance(raw_script, list) else []:
        raw_calls = turn.get("calls") if isinstance(turn, dict) else None
        calls = []
        for call in raw_calls if isinstance(raw_calls, list) else []:
            tool = call.get("tool") if isinstance(call, dict) else None
            calls.append(SimpleNamespace(tool=tool if isinstance(tool, str) else None))
        turns.append(SimpleNamespace(calls=calls))
    return turns


def _lenient_steps(raw_steps: object) -> list[SimpleNamespace]:
    steps = []
    for i, raw in enumerate(raw_steps if isinstance(raw_steps, list) else []):
        step = raw if isinstance(raw, dict) else {}
        agent = step.get("agent")
        raw_loop = step.get("loop")
        loop = None
        if isinstance(raw_loop, dict):
            loop = SimpleNamespace(
                steps=_lenient_steps(raw_loop.get("steps")),
                max_iterations=raw_loop.get("maxIterations"),
                until=raw_loop.get("until"),
                until_agent=raw_loop.get("untilAgent"),
                for_each=raw_loop.get("forEach") if isinstance(raw_loop.get("forEach"), str | list) else None,
                max_concurrency=raw_loop.get("maxConcurrency"),
                delay=raw_loop.get("delay"),
                kind="repeat" if raw_loop.get("forEach") is None else "forEach",
            )
        elif raw_loop is not None:
            loop = SimpleNamespace(broken=True, steps=[], kind="repeat")
        steps.append(
            SimpleNamespace(
                broken=not isinstance(raw, dict),
                id=step.get("id") if isinstance(step.get("id"), str) else f"#{i}",
                agent=agent if isinstance(agent, str) or agent is None else _BROKEN,
                instructions=step.get("instructions") if isinstance(step.get("instructions"), str) else "",
                depends_on=_strings(step.get("dependsOn")),
                loop=loop,
                include=step.get("include") if isinstance(step.get("include"), str) else None,
                with_=step.get("with") if isinstance(step.get("with"), dict) else {},
                condition=step.get("condition") if isinstance(step.get("condition"), str) else None,
                context_files=_strings(step.get("contextFiles")),
                included=None,
            )
        )
    return steps


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _input_type(declared: object) -> str | None:
    kind = declared.get("type", "string") if isinstance(declared, dict) else None
    # Any YAML value may stand here: a list or a mapping cannot be looked up.
    return kind if isinstance(kind, str) and kind in INPUT_TYPES else None
