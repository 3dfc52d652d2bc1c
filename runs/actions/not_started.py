"""Steps that end before they start, as the state machine decides when
they would: a step whose ``condition`` is false is skipped, one whose
condition fails to evaluate fails, and the failure policy stops what that
failure stops (agents/core/conditions.py)."""

from __future__ import annotations

from agents.core import machine
from agents.core.decisions import FailStep, SkipStep
from agents.events import Event as RuntimeEvent
from agents.events.run_events import Error, StepSkipped
from agents.router import DropReason
from runs.actions.common import router_for
from runs.models import Step
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork


def not_started(run_id: int, decision: SkipStep | FailStep | machine.StopSteps) -> None:
    """Apply ``decision`` in run ``run_id``, whose lock the caller holds:
    each step it names that has not ended ends with its event, its mailbox
    closed."""
    with UnitOfWork(run_id) as uow:
        uow.mark_locked()  # by the caller
        _end_steps(run_id, decision, uow)


def _end_steps(run_id: int, decision: SkipStep | FailStep | machine.StopSteps, uow: UnitOfWork) -> None:
    sink = uow.sink
    step_ids = decision.step_ids if isinstance(decision, machine.StopSteps) else (decision.step_id,)
    for step in Step.objects.filter(run_id=run_id, step_id__in=step_ids).exclude(status__in=Step.TERMINAL):
        if isinstance(decision, SkipStep):
            store().end_step(step, Step.Status.SKIPPED)
            sink.emit(RuntimeEvent.of(StepSkipped(reason=decision.reason, status=Step.Status.SKIPPED), step.step_id))
        elif isinstance(decision, FailStep):
            store().end_step(step, Step.Status.FAILED, error=decision.error)
            sink.emit(RuntimeEvent.of(Error(error=decision.error), step.step_id))
        else:
            store().end_step(step, decision.status)
            reason = f"dependency failed: {decision.status} by onStepFailure"
            sink.emit(RuntimeEvent.of(StepSkipped(reason=reason, status=decision.status), step.step_id))
        if step.kind == Step.Kind.STEP:
            router_for(run_id, uow=uow).close(step.step_id, DropReason.TARGET_TERMINAL)
