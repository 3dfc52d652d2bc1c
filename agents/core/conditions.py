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

A loop's own ``condition`` is read once, when its first step would start
(what the loop waits for has finished then), under the loop's runtime id
in ``RunState.conditions``, with the variables of the loop's level. False
(or reading what no step gave): every step of the loop, its own row
included, is skipped, as zenflow skips the loop step; failing to evaluate
fails them all. Once a step of the loop has started the condition held.
"""

from __future__ import annotations

from typing import Any

from agents import cel, ids
from agents.core.decisions import FailStep, SkipStep
from agents.core.state import RunState


def first_unmet(state: RunState, start: tuple[str, ...]) -> SkipStep | FailStep | None:
    """The first of the steps about to ``start`` whose condition is not
    true, as what follows for it; None when every condition holds."""
    for step_id in start:
        unmet = _loop_unmet(state, step_id)
        if unmet is None and step_id in state.conditions:
            unmet = _unmet(state, step_id, step_id, ())
        if unmet is not None:
            return unmet
    return None


def _loop_unmet(state: RunState, step_id: str) -> SkipStep | FailStep | None:
    """What follows for the loops ``step_id`` runs in whose condition is not
    true, read before any of their steps started."""
    for loop in ids.loops_of(step_id):
        if loop not in state.conditions:
            continue
        members = [s for s in state.steps if s.runtime_id == loop or s.runtime_id.startswith((f"{loop}.", f"{loop}["))]
        if any(s.status != "pending" for s in members if s.kind == "step"):
            continue  # its condition held when its first step started
        others = tuple(s.runtime_id for s in members if s.runtime_id != step_id)
        unmet = _unmet(state, loop, step_id, others)
        if unmet is not None:
            return unmet
    return None


def _unmet(state: RunState, owner: str, step_id: str, others: tuple[str, ...]) -> SkipStep | FailStep | None:
    """``owner``'s condition (a step's, or a loop's for its steps ``step_id``
    and ``others``) evaluated: None when true."""
    expression = state.conditions[owner]
    what = "condition" if owner == step_id else f"loop {owner}'s condition"
    try:
        if cel.evaluate_bool(expression, variables(state, owner)):
            return None
    except cel.CelMissingData as exc:
        return SkipStep(step_id, f"{what} read what no finished step gave ({exc})", missing_data=True, others=others)
    except cel.CelError as exc:
        return FailStep(step_id, f"{what}: {exc}", others=others)
    return SkipStep(step_id, f"{what} false: {expression}", others=others)


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
