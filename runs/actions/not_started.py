"""Steps that end before they start, as the state machine decides when
they would: a step whose ``condition`` is false is skipped, one whose
condition fails to evaluate fails, and the failure policy stops what that
failure stops (agents/core/conditions.py). A step the policy stops while
it runs (``abort``) takes what it waited for with it, as a cancel does:
its pending approvals lapse and its child runs are cancelled."""

from __future__ import annotations

from agents.core import machine
from agents.core.decisions import FailStep, SkipStep
from agents.events import Event as RuntimeEvent
from agents.events.run_events import Error, Message, StepSkipped
from agents.router import DropReason
from runs import queue
from runs.actions.common import router_for
from runs.actions.containers import repeat_loop_of
from runs.actions.ending import cancel_step_children_after_commit, lapse_pending
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
    step_ids = decision.step_ids if isinstance(decision, machine.StopSteps) else (decision.step_id, *decision.others)
    drop = DropReason.TARGET_TERMINAL
    for step in Step.objects.filter(run_id=run_id, step_id__in=step_ids).exclude(status__in=Step.TERMINAL):
        if isinstance(decision, SkipStep):
            if decision.missing_data:  # zenflow's note before the skip
                note = Message(text="condition eval: missing data, skipping step", reason="condition")
                sink.emit(RuntimeEvent.of(note, step.step_id))
            store().end_step(step, Step.Status.SKIPPED)
            sink.emit(RuntimeEvent.of(StepSkipped(reason=decision.reason, status=Step.Status.SKIPPED), step.step_id))
        elif isinstance(decision, FailStep):
            store().end_step(step, Step.Status.FAILED, error=decision.error)
            sink.emit(RuntimeEvent.of(Error(error=decision.error), step.step_id))
        else:
            _stop(step, decision, uow)
            if decision.drop == "workflow_cancelled":
                drop = DropReason.WORKFLOW_CANCELLED
        if step.kind == Step.Kind.STEP:
            router_for(run_id, uow=uow).close(step.step_id, drop)
        if repeat_loop_of(step.step_id) is not None:  # its iteration may have ended with it
            queue.send_after_commit(queue.END_ITERATION, run_id, step.step_id)


def _stop(step: Step, decision: machine.StopSteps, uow: UnitOfWork) -> None:
    """End ``step`` as the failure policy's ``decision`` says (after a step
    whose condition failed); a running one lapses its pending approvals and
    cancels its child runs."""
    was_running = step.status == Step.Status.RUNNING
    store().end_step(step, decision.status)
    if decision.aborted:
        reason = "run aborted: a step's condition failed"
    else:
        reason = f"dependency failed: {decision.status} by onStepFailure"
    uow.sink.emit(RuntimeEvent.of(StepSkipped(reason=reason, status=decision.status), step.step_id))
    if was_running:  # only a running step can wait for a decision or a child
        step.status = decision.status
        lapse_pending(step.run_id, f"step {step.step_id} was {decision.status}: {reason}", uow, step_id=step.step_id)
        cancel_step_children_after_commit(step)
