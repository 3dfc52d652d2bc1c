"""A step of a workflow by its path of step ids, through its loops and
includes (the path a runtime id names: ``agents.expansion.condition_path``)."""

from __future__ import annotations

from collections.abc import Sequence

from agents.spec.workflow import StepSpec, WorkflowSpec


def step_at(spec: WorkflowSpec, path: Sequence[str]) -> StepSpec | None:
    """The step ``path`` names in ``spec``, or None (no such step)."""
    steps: Sequence[StepSpec] = spec.steps
    found: StepSpec | None = None
    for part in path:
        found = next((step for step in steps if step.id == part), None)
        if found is None:
            return None
        if found.loop is not None:
            steps = found.loop.steps
        elif found.included is not None:
            steps = found.included.steps
        else:
            steps = ()
    return found


def own_timeouts(spec: WorkflowSpec) -> dict[tuple[str, ...], float]:
    """The steps that have their own ``timeout``, by their path of step ids."""
    found: dict[tuple[str, ...], float] = {}

    def walk(steps: Sequence[StepSpec], path: tuple[str, ...]) -> None:
        for step in steps:
            if step.timeout is not None:
                found[(*path, step.id)] = step.timeout
            if step.loop is not None:
                walk(step.loop.steps, (*path, step.id))
            elif step.included is not None:
                walk(step.included.steps, (*path, step.id))

    walk(spec.steps, ())
    return found
