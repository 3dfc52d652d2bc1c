"""The state machine's view of a run (agents/core/machine.py RunState),
made from its step rows (runs/store/sql StepRow), and what it asks of the
run's coordinator: whether it spawns workers and must plan first."""

from __future__ import annotations

from agents.core import machine
from agents.router import COORDINATOR
from agents.spec import WorkflowSpec
from runs.actions.catalog import workflow_spec
from runs.models import Run, Step
from runs.store.sql import StepRow, step_row_of


def run_state(status: str, rows: list[StepRow], spec: WorkflowSpec, coordinator: machine.CoordinatorState):
    """The state machine's view of a run from its step rows (in position
    order, the coordinator left out; ``step_row`` makes one of a Step)."""
    return machine.RunState(
        status=status,
        steps=tuple(step_state(row) for row in rows),
        coordinator=coordinator,
        max_running=spec.options.max_concurrency,
        on_step_failure=spec.options.on_step_failure,
        steps_may_be_added=can_add_steps(spec, rows),
    )


def step_state(row: StepRow) -> machine.StepState:
    return machine.StepState(
        runtime_id=row.step_id,
        status=row.status,
        depends_on=row.depends_on,
        kind="loop" if row.kind == Step.Kind.LOOP else "step",
        limits=row.limits,
        resuming=row.resuming,
        position=row.position,
    )


def can_add_steps(spec: WorkflowSpec, rows: list) -> bool:
    """A repeat-until loop adds an iteration's steps, a coordinator that
    spawns workers adds its workers."""
    return spawns_workers(spec) or any(row.kind == Step.Kind.LOOP for row in rows)


def plans_first(run: Run) -> bool:
    """A coordinator that can spawn workers takes a plan wake before anything
    else; this is true until it has."""
    return coordinator_plans_first(run.pk, workflow_spec(run.workflow))


def spawns_workers(spec: WorkflowSpec) -> bool:
    agent = spec.agents.get(COORDINATOR)
    return agent is not None and "spawn_worker" in agent.tools


def coordinator_plans_first(run_id: int, spec: WorkflowSpec) -> bool:
    # Without a Run: building one (every field's default) cost more than
    # the rest of a fan-out step's scheduling.
    if not spawns_workers(spec):
        return False
    return Step.objects.filter(run_id=run_id, step_id=COORDINATOR, turns=0).exists()


def step_row(step: Step) -> StepRow:
    """A Step's row, as scheduling reads it."""
    return step_row_of(
        step.pk,
        step.step_id,
        step.kind,
        step.agent,
        step.status,
        step.depends_on,
        step.limits,
        step.resuming,
        step.position,
    )
