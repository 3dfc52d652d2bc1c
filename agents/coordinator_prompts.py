"""What the coordinator's model is told about the run it coordinates.

A real model plans and routes only as well as it sees the run: the command a
person typed, the workflow chosen for it, the run's input values and the
steps with their states. Its system prompt (the workflow's ``coordinator``
agent's ``system`` text first) and its planning prompt are rendered with the
run's inputs as step instructions are (``$name``; ``agents.spec.usage``
refuses an unknown one), and every wake starts with the steps' states.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from string import Template
from typing import Any

# A step's instructions as the coordinator's system prompt lists them.
STEP_SUMMARY_CHARS = 200
# Step ids named per state in a wake's "Steps now".
STATE_IDS = 20
# The command as the prompts quote it (a person's text: bounded like inputs are).
COMMAND_CHARS = 2000


@dataclass(frozen=True)
class PromptStep:
    step_id: str
    agent: str
    status: str
    instructions: str = ""


@dataclass(frozen=True)
class RunView:
    """The run as the coordinator's prompts show it."""

    workflow: str
    inputs: Mapping[str, Any]
    steps: Sequence[PromptStep]
    command: str = ""
    description: str = ""
    # The workflow's successCriteria, checked against the run's claims when it ends.
    criteria: Sequence[str] = ()


def render(text: str, inputs: Mapping[str, Any]) -> str:
    """``text`` with ``$name`` replaced by the input's value, as step
    instructions are; ``$$`` is a literal ``$`` and anything else is left."""
    return Template(text).safe_substitute({name: _text(value) for name, value in inputs.items()})


def system_prompt(view: RunView, agent_system: str = "") -> str:
    """The coordinator's system prompt: its agent's own text, how it talks to
    the steps, and the run."""
    # What each tool does its description says (sent with every request): the rules say when.
    rules = (
        f"You are the coordinator of the zenweb workflow '{view.workflow}'. Steps talk only through "
        "you: their messages arrive in your inbox. Address a step by its id, exactly as listed. "
        "Call finalize(summary) once every step has finished."
    )
    parts = [render(agent_system, view.inputs).strip(), rules, _run_text(view)]
    return "\n\n".join(part for part in parts if part)


def plan_prompt(view: RunView) -> str:
    """The first wake of a coordinator that spawns workers: what to plan for."""
    task = _one_line(view.command)[:COMMAND_CHARS] or view.description or f"a run of {view.workflow}"
    return (
        f"Plan the work for: {task}\n"
        f"The run's inputs: {_inputs_json(view.inputs)}\n"
        "Split it into workers with spawn_worker; put the inputs each needs into its task."
    )


def states_text(steps: Sequence[PromptStep]) -> str:
    """The steps' states now, said at the start of every wake: grouped by
    state, at most ``STATE_IDS`` ids each (a wide fan-out's wakes would
    otherwise grow the coordinator's transcript by every step id each time)."""
    if not steps:
        return "Steps now: none yet."
    by_status: dict[str, list[str]] = {}
    for step in steps:
        by_status.setdefault(step.status, []).append(step.step_id)
    if len(by_status) == 1 and len(steps) <= STATE_IDS:
        # The common small case reads as a sentence: "write completed".
        status, ids = next(iter(by_status.items()))
        return f"Steps now: {', '.join(ids)} {status}."
    parts = []
    for status, ids in by_status.items():
        shown = ", ".join(ids[:STATE_IDS]) + (f" and {len(ids) - STATE_IDS} more" if len(ids) > STATE_IDS else "")
        parts.append(f"{len(ids)} {status} ({shown})")
    return "Steps now: " + "; ".join(parts) + "."


def _run_text(view: RunView) -> str:
    lines = [f"The run: workflow '{view.workflow}'."]
    if view.command:
        lines.append(f"The command that started it: {_one_line(view.command)[:COMMAND_CHARS]}")
    lines.append(f"Its inputs: {_inputs_json(view.inputs)}")
    if view.criteria:
        lines.append("Its success criteria (the run's claims are checked against them when it ends):")
        lines += [f"- {criterion}" for criterion in view.criteria]
    if view.steps:
        lines.append("Steps:")
        for step in view.steps:
            # A step row keeps its instructions as written; the step's own turn substitutes them.
            instructions = render(step.instructions, {**view.inputs, "step": step.step_id})
            summary = _one_line(instructions)[:STEP_SUMMARY_CHARS]
            lines.append(f"- {step.step_id} ({step.status}): agent {step.agent}; {summary}")
    else:
        lines.append("Steps: none yet.")
    return "\n".join(lines)


def _inputs_json(inputs: Mapping[str, Any]) -> str:
    return json.dumps(dict(inputs), ensure_ascii=False) if inputs else "none"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
