"""Forking a run from one of its steps: a new run of the same workflow
version whose steps before the fork point are the first run's results,
reused (no model or tool is called for them again), and whose fork step,
with its instructions as the person edited them, and what follows it run
again.

``do_fork_run`` makes the fork through do_create_run: the same checks,
limits and approval of destructive work as any start. What its start does
differently: runs/actions/fork_reuse.py.
"""

from __future__ import annotations

from collections.abc import Mapping

from runs.actions.catalog import InputError
from runs.actions.lifecycle import do_create_run
from runs.models import Run, Step

# The most characters of instructions a person may give a forked step.
MAX_FORK_INSTRUCTIONS = 20_000


def fork_refusal(parent: Run, step_id: str) -> str:
    """Why ``parent`` cannot be forked at ``step_id``; "" if it can."""
    if not parent.is_terminal:
        return f"run {parent.pk} is {parent.status}: only a run that has ended can be forked"
    # A worker the coordinator spawned is not in the workflow: the fork's coordinator plans its own.
    rows = parent.steps.filter(kind=Step.Kind.STEP, spawned_by="").order_by("position")
    steps = list(rows.values_list("step_id", flat=True))
    if step_id not in steps:
        known = ", ".join(steps) or "none"
        return f"run {parent.pk} has no step {step_id!r} to fork at (its steps: {known})"
    return ""


def do_fork_run(
    parent: Run,
    step_id: str,
    *,
    user=None,
    instructions: str | None = None,
    inputs: Mapping[str, object] | None = None,
) -> Run:
    """A new run of ``parent``'s workflow version, forked at its step
    ``step_id``: the steps before it reuse ``parent``'s results. Given
    ``instructions`` replace that step's; given ``inputs`` replace the
    run's (else ``parent``'s). InputError when it cannot be forked, or as
    do_create_run refuses a start (not offered, bad inputs, too many runs)."""
    refusal = fork_refusal(parent, step_id)
    if refusal:
        raise InputError(refusal)
    if instructions is not None and len(instructions) > MAX_FORK_INSTRUCTIONS:
        raise InputError(
            f"instructions for step {step_id!r}: {len(instructions)} characters, at most {MAX_FORK_INSTRUCTIONS}"
        )
    fork = {"forked_from": parent, "fork_step": step_id, "fork_instructions": (instructions or "").strip()}
    values = parent.inputs if inputs is None else inputs
    return do_create_run(parent.workflow, values, user=user, command=parent.command, mode=parent.mode, fork=fork)
