"""What a forked run's start does (lifecycle.do_start_run): its fork step
takes the edited instructions, and its steps before the fork point are
completed with the first run's results, reused (runs/actions/forks.py makes
the fork)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from agents.events import Event as RuntimeEvent
from agents.events.run_events import StepReused
from agents.expansion import RuntimeStep
from runs.actions.containers import repeat_loop_of
from runs.models import Run, Step
from runs.store.sql import store


def fork_runtime(run: Run, runtime: Sequence[RuntimeStep]) -> list[RuntimeStep]:
    """The runtime steps of forked ``run``, its fork step with the edited instructions."""
    if not run.fork_instructions:
        return list(runtime)
    return [
        dataclasses.replace(step, instructions=run.fork_instructions) if step.runtime_id == run.fork_step else step
        for step in runtime
    ]


def reuse_before_fork(run: Run, steps: Iterable[Step], sink) -> list[Step]:
    """Complete forked ``run``'s new ``steps`` that come before its fork
    step with its parent's results, each with a step_reused event on
    ``sink``; the steps reused. A step is reused when its parent's step of
    the same id completed, with the same agent, model and instructions, it
    is not in a repeat-until loop (whose iterations are decided as they
    run), and every step it depends on was reused: any other runs again."""
    ordered = sorted((step for step in steps if step.kind == Step.Kind.STEP), key=lambda step: step.position)
    parent_id = run.forked_from_id
    fork_at = next((step.position for step in ordered if step.step_id == run.fork_step), None)
    if fork_at is None or parent_id is None:
        return []
    done = {s.step_id: s for s in Step.objects.filter(run_id=parent_id, status=Step.Status.COMPLETED)}
    reused: list[Step] = []
    reused_ids: set[str] = set()
    for step in ordered:
        before = done.get(step.step_id)
        if step.position >= fork_at or before is None or not _same_work(step, before, reused_ids):
            continue
        store().complete_as_reused(step, before)
        reused.append(step)
        reused_ids.add(step.step_id)
        reuse = StepReused(from_run=parent_id, from_step=before.step_id, output=before.output)
        sink.emit(RuntimeEvent.of(reuse, step.step_id))
    return reused


def _same_work(step: Step, before: Step, reused: set[str]) -> bool:
    same = (step.agent, step.model, step.instructions) == (before.agent, before.model, before.instructions)
    return same and repeat_loop_of(step.step_id) is None and all(dep in reused for dep in step.depends_on)
