"""The state machine's view of a run (agents/core/machine.py RunState),
made from its step rows (runs/store/sql StepRow); whether a step's
completion may be decided from those rows without the run's lock
(decided_from_rows); and what it asks of the run's coordinator: whether it
spawns workers and must plan first."""

from __future__ import annotations

from agents import expansion, ids
from agents.core import machine
from agents.core.ready import past_cap
from agents.router import COORDINATOR
from agents.spec import WorkflowSpec
from runs.actions.catalog import workflow_spec
from runs.models import Run, Step
from runs.store.sql import StepRow, step_row_of


def run_state(
    status: str, rows: list[StepRow], spec: WorkflowSpec, coordinator: machine.CoordinatorState, run_id: int = 0
):
    """The state machine's view of a run from its step rows (in position
    order, the coordinator left out; ``step_row`` makes one of a Step).
    With ``run_id``: the conditions of its pending steps, and the finished
    steps' outputs they read (only in a workflow with conditions)."""
    conditions = pending_conditions(spec, rows) if run_id else {}
    return machine.RunState(
        status=status,
        steps=tuple(step_state(row) for row in rows),
        coordinator=coordinator,
        max_running=spec.options.max_concurrency,
        on_step_failure=spec.options.on_step_failure,
        scheduler=spec.options.scheduler,
        steps_may_be_added=can_add_steps(spec, rows),
        conditions=conditions,
        outputs=finished_outputs(run_id) if conditions else {},
    )


def decided_from_rows(spec: WorkflowSpec, finished: Step) -> bool:
    """Whether what ``finished`` completing starts, in a run of ``spec``, is
    decided from the run's step rows (read with its write, or once after
    it) without the run's lock: steps cannot be added (decides_without_lock),
    and ``finished`` is not numbered past its forEach loop's cap
    (ready.past_cap), which holds steps back: the decision is made under
    the lock then (schedule with ``locked``, inside the write's transaction, on
    PostgreSQL's usual last turn; else a pass of its own after commit,
    which reads the rows itself)."""
    return decides_without_lock(spec) and not past_cap(finished.step_id, finished.limits)


def decides_without_lock(spec: WorkflowSpec) -> bool:
    """Whether a completion in a run of ``spec`` may be decided on without
    the run's lock (from the steps read with its write, or once after it
    committed): not when steps can be added (a coordinator that spawns
    workers may have to plan first; a repeat-until loop adds iterations).
    Otherwise whether a cap binds (the run's, a forEach loop's) is the state
    machine's to say, from those rows: when one can, the pass under the
    lock decides. Nor in a workflow with step conditions: what they read
    (the finished steps' outputs) is read under the lock."""
    return not spawns_workers(spec) and "repeat" not in expansion.loop_kinds(spec) and not has_conditions(spec)


def has_conditions(spec: WorkflowSpec) -> bool:
    """Whether a step of ``spec`` has a ``condition`` that runs."""
    return bool(_conditions(spec))


def pending_conditions(spec: WorkflowSpec, rows: list[StepRow]) -> dict[str, str]:
    """The ``condition`` of each pending step of ``rows`` that has one, and
    of each loop such a step runs in (by the loop's runtime id)."""
    conditions = _conditions(spec)
    if not conditions:
        return {}
    found = {}
    for row in rows:
        if row.kind == Step.Kind.STEP and row.status == Step.Status.PENDING:
            for runtime_id in (*ids.loops_of(row.step_id), row.step_id):
                condition = conditions.get(expansion.condition_path(runtime_id))
                if condition is not None:
                    found[runtime_id] = condition
    return found


def finished_outputs(run_id: int) -> dict[str, str]:
    """The outputs of run ``run_id``'s finished steps (what conditions read)."""
    finished = Step.objects.filter(run_id=run_id, status__in=Step.TERMINAL).exclude(kind=Step.Kind.COORDINATOR)
    return dict(finished.values_list("step_id", "output"))


# Each workflow version's conditions, found once (a spec is kept for the
# life of the process: runs.actions.catalog), with the spec it was found in.
_CONDITIONS: dict[int, tuple[WorkflowSpec, dict[tuple[str, ...], str]]] = {}


def _conditions(spec: WorkflowSpec) -> dict[tuple[str, ...], str]:
    kept = _CONDITIONS.get(id(spec))
    if kept is None or kept[0] is not spec:
        kept = _CONDITIONS[id(spec)] = (spec, expansion.step_conditions(spec))
    return kept[1]


def step_state(row: StepRow) -> machine.StepState:
    return machine.StepState(
        runtime_id=row.step_id,
        status=row.status,
        depends_on=row.depends_on,
        kind="loop" if row.kind == Step.Kind.LOOP else "step",
        limits=row.limits,
        resuming=row.resuming,
        position=row.position,
        agent=row.agent,
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
