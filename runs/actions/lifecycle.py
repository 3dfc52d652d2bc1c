"""A run from start to end: create, start, finish, fail, cancel (which
steps start: runs/actions/scheduling.py). workflow_end is always a run's last event."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.db.models import Case, F, TextField, Value, When
from django.utils import timezone

from agents import expansion
from agents.core import machine
from agents.events import Event as RuntimeEvent
from agents.handler import mode_refusal
from agents.router import COORDINATOR, DropReason
from runs.actions.approvals import lapse_pending
from runs.actions.catalog import InputError, check_inputs, workflow_spec
from runs.actions.children import cancel_children_after_commit
from runs.actions.commands import finish_command
from runs.actions.common import router_for
from runs.actions.containers import create_steps
from runs.actions.scheduling import schedule
from runs.actions.tool_tasks import stop_unfinished_calls
from runs.models import Run, Step, Workflow
from runs.store.events import DjangoEventSink


def do_create_run(
    workflow: Workflow, inputs: Mapping[str, object], *, user=None, command: str = "", mode: str | None = None
) -> Run:
    """Create a pending run and have a worker start it after commit. A
    destructive workflow waits for approval first (``awaiting_approval``).
    ``mode`` is the person's (chat or code): a code-mode workflow refuses
    chat mode with InputError, as a command does. None (a caller that names
    the workflow itself: the CLI, the demo) takes the workflow's own."""
    from runs import tasks
    from runs.actions.approvals import request_workflow_approval

    spec = workflow_spec(workflow)
    mode = mode or spec.mode
    refusal = mode_refusal(spec.name, spec.mode, mode)
    if refusal:
        raise InputError(refusal)
    values = check_inputs(spec, inputs)
    with transaction.atomic():
        run = Run.objects.create(workflow=workflow, inputs=values, created_by=user, command=command, mode=mode)
        if spec.destructive:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.AWAITING_APPROVAL)
            run.status = Run.Status.AWAITING_APPROVAL
            request_workflow_approval(run)
        else:
            transaction.on_commit(lambda: tasks.start_run.delay(run.pk), robust=True)
    return run


def do_block_run(run_id: int, reason: str) -> None:
    """End a run whose destructive work was rejected or lapsed: ``blocked``."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        run.status = Run.Status.BLOCKED
        run.error = reason
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)


def do_start_run(run_id: int) -> None:
    """Expand the workflow into steps, register their mailboxes, start the
    steps that are ready. A second delivery of the same task does nothing."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, status=Run.Status.PENDING).update(
            status=Run.Status.RUNNING, started=timezone.now(), stuck_reason=""
        ):
            return
        run = Run.objects.select_related("workflow").get(pk=run_id)
        spec = workflow_spec(run.workflow)
        Step.objects.create(
            run=run,
            step_id=COORDINATOR,
            kind=Step.Kind.COORDINATOR,
            agent=COORDINATOR,
            status=Step.Status.RUNNING,
            started=timezone.now(),
        )
        try:
            runtime = expansion.expand(spec, run.inputs)
        except expansion.ExpansionError as exc:
            error = f"could not start: {exc}"
            transaction.on_commit(lambda: do_fail_run(run_id, error))
            return
        create_steps(run, runtime)
        DjangoEventSink(run.pk).emit(
            RuntimeEvent(
                "workflow_start",
                "",
                {
                    "workflow": spec.name,
                    "version": run.workflow.version,
                    "inputs": run.inputs,
                    "steps": [step.runtime_id for step in runtime],
                    **_parent_of(run),
                },
            )
        )
        schedule(run.pk)


def _parent_of(run: Run) -> dict[str, object]:
    call = run.parent_tool_call
    if call is None:
        return {}
    return {"parent_run_id": call.run_id, "parent_tool_call_id": call.tool_call_id}


def do_finish_run(run_id: int) -> None:
    """End a run whose steps are all done, with zenflow's status rule
    (agents.core.machine.run_end): any failed or cancelled step makes it
    partial (if some step completed) or failed; skipped steps do not count
    against it."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        rows = run.steps.exclude(kind=Step.Kind.COORDINATOR).order_by("position")
        steps = [
            machine.StepState(runtime_id=step_id, status=status, error=error)
            for step_id, status, error in rows.values_list("step_id", "status", "error")
        ]
        end = machine.run_end(machine.RunState(status=run.status, steps=tuple(steps)))
        run.status = end.status
        if end.error and not run.error:
            run.error = end.error
        _end_run(run)


def do_fail_run(run_id: int, error: str) -> None:
    """Stop a run that cannot go on: unfinished steps are cancelled."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        DjangoEventSink(run.pk).emit(RuntimeEvent("error", "", {"error": error}))
        _stop_unfinished_steps(run, DropReason.TARGET_TERMINAL)
        run.status = Run.Status.FAILED
        run.error = error
        _end_run(run)


def do_cancel_run(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel a run: running steps stop at their next turn boundary (their
    queued tasks find nothing to do), unread messages and every later send
    drop as workflow-cancelled. False if the run had already ended."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return False
        run.status = Run.Status.CANCELLED
        run.error = reason
        run.save(update_fields=["status", "error"])
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)
    return True


def _stop_unfinished_steps(run: Run, reason: DropReason) -> None:
    router = router_for(run.pk)
    for step in run.steps.exclude(status__in=Step.TERMINAL).exclude(kind=Step.Kind.COORDINATOR):
        step.status = Step.Status.CANCELLED
        step.finished = timezone.now()
        step.save(update_fields=["status", "finished"])
        router.close(step.step_id, reason)


_COORDINATOR_END = {
    Run.Status.BLOCKED: Step.Status.CANCELLED,
    Run.Status.COMPLETED: Step.Status.COMPLETED,
    Run.Status.PARTIAL: Step.Status.COMPLETED,
    Run.Status.FAILED: Step.Status.FAILED,
    Run.Status.CANCELLED: Step.Status.CANCELLED,
}


def _end_run(run: Run) -> None:
    run.finished = timezone.now()
    run.coordinator_busy = False
    # Never a full save: the counters on this row moved while we emitted events.
    run.save(update_fields=["status", "error", "finished", "coordinator_busy"])
    # The coordinator lives as long as its run and ends the way the run did.
    # A coordinator that did not end completed says why, unless it had said already.
    ended = _COORDINATOR_END[run.status]
    why = run.error if ended != Step.Status.COMPLETED else ""
    said = Case(When(error="", then=Value(why)), default=F("error"), output_field=TextField())
    run.steps.filter(kind=Step.Kind.COORDINATOR).update(status=ended, finished=run.finished, error=said)
    Step.objects.filter(run=run, resuming=True).update(resuming=False)
    router_for(run.pk).close(COORDINATOR, DropReason.TARGET_TERMINAL)
    # A worker still running one of its calls finds it closed and writes nothing after the end.
    stop_unfinished_calls(run.pk, f"the run ended {run.status}")
    # Work that ended needs no decision any more; its lapses come before the end.
    lapse_pending(run.pk, f"the run ended {run.status}")
    DjangoEventSink(run.pk).emit(
        RuntimeEvent("workflow_end", "", {"status": run.status, "result": run.result, "error": run.error})
    )
    cancel_children_after_commit(run)
    finish_command(run)
    if run.parent_tool_call_id:
        from runs import tasks

        transaction.on_commit(lambda: tasks.deliver_child_result.delay(run.pk), robust=True)
