"""A step's ``condition`` (zenflow's CEL): read when the step would start,
by ``decide`` (agents/core/machine.py). True: it starts. False: it is
skipped, and its dependents go on as after a completed step (a skip for a
condition does not cascade). An expression that reads what no finished
step gave (a step that was skipped or has not run) is skipped too; one that
fails otherwise (a type error) fails its step, as zenflow's executor does.

The expression reads zenflow's variables: ``steps``, each finished step's
``content`` (its output), ``status`` and ``result``, by its runtime id and,
for a step inside a container, also by the bare id of the steps of its own
iteration (``steps.draft`` in ``refine.0.review``); the rest (``iteration``,
``item``, ``index``, ``content``, ``result``, ``status``) hold zenflow's
empty values.
"""

from __future__ import annotations

from typing import Any

from agents import cel
from agents.core.decisions import FailStep, SkipStep
from agents.core.state import RunState


def first_unmet(state: RunState, start: tuple[str, ...]) -> SkipStep | FailStep | None:
    """The first of the steps about to ``start`` whose condition is not
    true, as what follows for it; None when every condition holds."""
    for step_id in start:
        expression = state.conditions.get(step_id)
        if expression is None:
            continue
        try:
            if cel.evaluate_bool(expression, variables(state, step_id)):
                continue
        except cel.CelMissingData as exc:
            return SkipStep(step_id, f"condition read what no finished step gave ({exc})", missing_data=True)
        except cel.CelError as exc:
            return FailStep(step_id, f"condition: {exc}")
        return SkipStep(step_id, f"condition false: {expression}")
    return None


def variables(state: RunState, step_id: str) -> dict[str, Any]:
    """What step ``step_id``'s condition reads (zenflow's variables)."""
    steps: dict[str, Any] = {}
    own, _, _ = step_id.rpartition(".")
    prefix = f"{own}." if own else ""
    for step in state.steps:
        if not step.terminal:
            continue
        finished = {"content": state.outputs.get(step.runtime_id, ""), "status": step.status, "result": {}}
        steps[step.runtime_id] = finished
        if prefix and step.runtime_id.startswith(prefix) and "." not in step.runtime_id[len(prefix) :]:
            steps.setdefault(step.runtime_id[len(prefix) :], finished)
    return {"steps": steps, "iteration": 0, "item": None, "index": 0, "content": "", "result": {}, "status": ""}
