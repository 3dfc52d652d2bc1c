"""A run's end: finish, fail, cancel, block (workflow_end is always a run's
last event), and what the end of a run or of a step takes with it: the
child runs of its calls are cancelled, its pending approvals lapse.

They call each other: a cancelled child run ends the same way, and a
rejected or lapsed workflow approval blocks its run; so they live together."""

from __future__ import annotations

from typing import NamedTuple

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.core import gates, machine
from agents.events import Event as RuntimeEvent
from agents.events.run_events import Error, WorkflowEnd
from agents.events.tool_events import ApprovalLapsed, ToolResult
from agents.router import COORDINATOR, DropReason
from agents.tools.errors import RetryHint, failure_text
from runs import queue
from runs.actions.command_results import finish_command
from runs.actions.common import router_for
from runs.actions.pending import deliver_result
from runs.actions.tool_tasks import stop_unfinished_calls
from runs.models import Approval, Run, Step, ToolCall
from runs.store import sql
from runs.store.events import DjangoEventSink


def do_block_run(run_id: int, reason: str) -> None:
    """End a run whose destructive work was rejected or lapsed: ``blocked``."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.is_terminal:
            return
        run.status = Run.Status.BLOCKED
        run.error = reason
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)


def do_finish_run(run_id: int) -> None:
    """End a run whose steps are all done (see ``finish_locked``)."""
    with transaction.atomic():
        run = _locked(run_id)
        if not run.is_terminal:
            finish_locked(run)


def finish_locked(run: Run) -> None:
    """End ``run``, running and locked in the caller's transaction (read
    under that lock, or since), whose steps are all done, with zenflow's
    status rule (agents.core.machine.run_end): any failed or cancelled step
    makes it partial (if some step completed) or failed; skipped steps do
    not count against it. Its ``result`` is written with its end."""
    rows = sql.end_steps(run.pk)
    workers = [row for row in rows if row.kind != Step.Kind.COORDINATOR]
    steps = [machine.StepState(runtime_id=row.step_id, status=row.status, error=row.error) for row in workers]
    end = machine.run_end(machine.RunState(status=run.status, steps=tuple(steps)))
    run.status = end.status
    if end.error and not run.error:
        run.error = end.error
    closed = any(row.mailbox_closed_reason for row in rows if row.kind == Step.Kind.COORDINATOR)
    _end_run(run, _Read(resuming=any(row.resuming for row in rows), coordinator_closed=closed))


def do_fail_run(run_id: int, error: str) -> None:
    """Stop a run that cannot go on: unfinished steps are cancelled."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.is_terminal:
            return
        DjangoEventSink(run.pk).emit(RuntimeEvent.of(Error(error=error)))
        _stop_unfinished_steps(run, DropReason.TARGET_TERMINAL)
        run.status = Run.Status.FAILED
        run.error = error
        _end_run(run)


def do_cancel_run(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel a run: running steps stop at their next turn boundary (their
    queued tasks find nothing to do), unread messages and every later send
    drop as workflow-cancelled. False if the run had already ended."""
    with transaction.atomic():
        run = _locked(run_id)
        if run.is_terminal:
            return False
        run.status = Run.Status.CANCELLED
        run.error = reason
        run.save(update_fields=["status", "error"])
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)
    return True


def _locked(run_id: int) -> Run:
    """Run ``run_id`` with its workflow (its router reads it), the run's row locked."""
    return Run.objects.select_for_update(of=("self",)).select_related("workflow").get(pk=run_id)


def _stop_unfinished_steps(run: Run, reason: DropReason) -> None:
    router = router_for(run, run_locked=True)
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


class _Read(NamedTuple):
    """What an end read of its run's steps under the run's lock: the writes
    it may leave out (a run's usual end, after its coordinator's finalize,
    makes neither)."""

    resuming: bool  # some step is being resumed
    coordinator_closed: bool  # the coordinator's mailbox is closed (finalize): nothing waits in it


# An end that read nothing: every write is made.
_UNREAD = _Read(resuming=True, coordinator_closed=False)


def _end_run(run: Run, read: _Read = _UNREAD) -> None:
    run.finished = timezone.now()
    run.coordinator_busy = False
    # The coordinator lives as long as its run and ends the way the run did.
    # A coordinator that did not end completed says why, unless it had said already.
    ended = _COORDINATOR_END[run.status]
    why = run.error if ended != Step.Status.COMPLETED else ""
    # Never a full save of the run: the counters on its row moved while we
    # emitted events. The result as read under the lock, or as its finish
    # round gave it. What else the end closes is read with it: most runs
    # leave none of it.
    end = sql.RunEnd(run.status, run.error, run.result, run.finished, ended, why)
    left = sql.end_run(run.pk, end)
    if read.resuming:
        Step.objects.filter(run=run, resuming=True).update(resuming=False)
    if not read.coordinator_closed:
        # A closed mailbox holds nothing unread: closing it drops what waits,
        # and every later send to it drops.
        router_for(run, run_locked=True).close(COORDINATOR, DropReason.TARGET_TERMINAL)
    if left.calls or left.executions:
        # A worker still running one of its calls finds it closed and writes nothing after the end.
        stop_unfinished_calls(run.pk, f"the run ended {run.status}", cancelled=run.status == Run.Status.CANCELLED)
    if left.approvals:
        # Work that ended needs no decision any more; its lapses come before the end.
        lapse_pending(run.pk, f"the run ended {run.status}")
    DjangoEventSink(run.pk).emit(RuntimeEvent.of(WorkflowEnd(status=run.status, result=run.result, error=run.error)))
    if left.children:
        cancel_children_after_commit(run)
    if left.command:
        finish_command(run)
    if run.parent_tool_call_id:
        queue.send_after_commit(queue.DELIVER_CHILD_RESULT, run.pk)


def cancel_children_after_commit(run: Run) -> None:
    """A run that ends takes the child runs its tool calls started with it."""
    _cancel_after_commit(Run.objects.filter(parent_tool_call__run=run), f"parent run {run.pk} ended {run.status}")


def cancel_step_children_after_commit(step: Step) -> None:
    """A step that ends before its run does takes the child runs its
    pending tool calls started with it: nobody would read their results."""
    reason = f"parent step {step.step_id} of run {step.run_id} ended {step.status}"
    _cancel_after_commit(Run.objects.filter(parent_tool_call__step=step), reason)


def _cancel_after_commit(children: QuerySet[Run], reason: str) -> None:
    for child in list(children.exclude(status__in=Run.TERMINAL).values_list("pk", flat=True)):
        transaction.on_commit(lambda child=child: do_cancel_run(child, reason))


def lapse_pending(run_id: int, reason: str, *, step_id: str | None = None) -> None:
    """Lapse the pending approvals of a step that ended (or, without
    ``step_id``, of a run that ended): approved, a call would still run.
    Each lapse is an event and a gated call gets the refusal as its result.
    Call with the run's lock held."""
    pending = Approval.objects.filter(run_id=run_id, status=Approval.Status.PENDING)
    if step_id is not None:
        pending = pending.filter(step_id=step_id)
    for approval in pending.select_for_update():
        close_approval(approval, Approval.Status.LAPSED, reason)


def close_approval(approval: Approval, status: str, reason: str) -> None:
    """Reject or lapse: the workflow ends blocked, or the call is refused."""
    decision = "reject" if status == Approval.Status.REJECTED else "lapse"
    decided = gates.ApprovalDecided(approval.kind, decision, reason)
    settle_approval(approval, status, reason, gates.after_approval(decided))


def settle_approval(approval: Approval, status: str, reason: str, decisions: tuple) -> None:
    """Record how ``approval`` ended (``status``, and ``reason`` for a
    rejection or lapse) and apply what follows it (agents/core/gates.py):
    the run starts or ends blocked, the call runs or is refused."""
    approval.status = status
    approval.decided_at = timezone.now()
    approval.reason = reason
    approval.save(update_fields=["status", "reason", "decided_at"])
    if status == Approval.Status.LAPSED:
        DjangoEventSink(approval.run_id).emit(
            RuntimeEvent.of(ApprovalLapsed(approval_id=approval.pk, reason=reason), approval.step_id)
        )
    for decision in decisions:
        if isinstance(decision, gates.StartRun):
            # Claimed here, once: the run leaves awaiting_approval exactly one time.
            if Run.objects.filter(pk=approval.run_id, status=Run.Status.AWAITING_APPROVAL).update(
                status=Run.Status.PENDING, destructive_approved=True
            ):
                Approval.objects.filter(pk=approval.pk).update(executed=True)
                queue.send_after_commit(queue.START_RUN, approval.run_id)
        elif isinstance(decision, gates.RunApprovedCall):
            queue.send_after_commit(queue.EXECUTE_APPROVED_CALL, approval.pk)
        elif isinstance(decision, machine.EndRun):
            do_block_run(approval.run_id, decision.error)
        elif isinstance(decision, gates.RefuseCall) and approval.tool_call_id:
            text = failure_text(
                decision.reason, RetryHint("domain_rejection", "replan", question="Is there a safer way?")
            )
            deliver_result(
                approval.tool_call,
                text,
                status=ToolCall.Status.BLOCKED,
                error_kind="domain_rejection",
                event=ToolResult,
                event_data={"approval_id": approval.pk, "status": status},
            )
