"""A run's end: finish, fail, cancel, block (workflow_end is always a run's
last event), and what the end of a run or of a step takes with it: the
child runs of its calls are cancelled, its pending approvals lapse.

They call each other: a cancelled child run ends the same way, and a
rejected or lapsed workflow approval blocks its run; so they live together."""

from __future__ import annotations

from functools import partial
from typing import Literal, NamedTuple

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents import telemetry
from agents.core import gates, machine
from agents.core.decisions import coordinator_end
from agents.core.happenings import ApprovalDecided
from agents.events import Event as RuntimeEvent
from agents.events.run_events import Error, WorkflowEnd
from agents.events.tool_events import ApprovalLapsed, ToolResult
from agents.router import COORDINATOR, DropReason
from agents.tools.errors import RetryHint, failure_text
from runs import metrics, queue
from runs.actions.command_results import finish_command
from runs.actions.common import router_for
from runs.actions.extensions import settle_created_tool
from runs.actions.pending import deliver_result
from runs.actions.questions import lapse_question
from runs.actions.tool_tasks import stop_unfinished_calls
from runs.models import Approval, Run, Step, ToolCall
from runs.store.sql import RunEnd, store
from runs.store.unit_of_work import UnitOfWork


def do_finish_run(run_id: int, owes_workers: bool = False) -> bool:
    """End a run whose steps are all done (see ``finish_locked``): whether it ended."""
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        run = _locked(run_id, uow)
        return not run.is_terminal and _finish(run, owes_workers, uow)


def finish_locked(run: Run, owes_workers: bool = False) -> bool:
    """End ``run``, running and locked in the caller's transaction (read
    under that lock, or since), with the status the state machine decides
    (machine.CoordinatorFinished; failed if its coordinator
    ``owes_workers``): whether it ended. A run with a step still to run (a
    worker its coordinator spawned as it finished) goes on. Its ``result``
    is written with its end."""
    with UnitOfWork(run.pk) as uow:
        uow.mark_locked()
        return _finish(run, owes_workers, uow)


def _finish(run: Run, owes_workers: bool, uow: UnitOfWork) -> bool:
    rows = store().end_steps(run.pk)
    workers = [row for row in rows if row.kind != Step.Kind.COORDINATOR]
    steps = [machine.StepState(runtime_id=row.step_id, status=row.status, error=row.error) for row in workers]
    state = machine.RunState(status=run.status, steps=tuple(steps))
    ends = [
        d for d in machine.decide(state, machine.CoordinatorFinished(owes_workers)) if isinstance(d, machine.EndRun)
    ]
    if not ends:
        return False
    for end in ends:
        if owes_workers:
            _apply_end(run, end, uow)  # a failure of its own: said with an error event
            return True
        run.status = end.status
        if end.error and not run.error:
            run.error = end.error
    closed = any(row.mailbox_closed_reason for row in rows if row.kind == Step.Kind.COORDINATOR)
    _end_run(run, uow, _Read(resuming=any(row.resuming for row in rows), coordinator_closed=closed))
    return True


def do_fail_run(run_id: int, error: str) -> None:
    """Stop a run that cannot go on (machine.RunFailed): it ends failed."""
    _decide_end(run_id, machine.RunFailed(error))


def do_cancel_run(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel a run: running steps stop at their next turn boundary (their
    queued tasks find nothing to do), unread messages and every later send
    drop as workflow-cancelled. False if the run had already ended."""
    return _decide_end(run_id, machine.RunCancelled(reason))


def end_run(run_id: int, end: machine.EndRun) -> None:
    """Apply ``end``, as the state machine decided it (a refused approval
    blocks the run, a deadline fails it), unless the run has ended."""
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        run = _locked(run_id, uow)
        if not run.is_terminal:
            _apply_end(run, end, uow)


def _decide_end(run_id: int, happened: machine.Happening) -> bool:
    """What the state machine decides ``happened`` leads to, under the
    run's lock, applied: whether the run ended (not if it had already)."""
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        run = _locked(run_id, uow)
        ends = [d for d in machine.decide(machine.RunState(run.status), happened) if isinstance(d, machine.EndRun)]
        for end in ends:
            _apply_end(run, end, uow)
    return bool(ends)


def _apply_end(run: Run, end: machine.EndRun, uow: UnitOfWork) -> None:
    """End ``run`` (locked, not ended) before its steps are all done, as
    ``end`` says: a failure's error is an event of its own; the unfinished
    steps are cancelled, their mail dropped as ``end.drop`` says."""
    if end.status == "failed":
        uow.sink.emit(RuntimeEvent.of(Error(error=end.error)))
    if end.status == "cancelled":
        # Stored before the steps stop: their mailboxes read it, and every
        # later send to them drops as workflow-cancelled.
        store().set_run_status(run, end.status, error=end.error)
    else:
        run.status, run.error = end.status, end.error
    _stop_unfinished_steps(run, _DROPS[end.drop], uow)
    _end_run(run, uow)


_DROPS = {"target_terminal": DropReason.TARGET_TERMINAL, "workflow_cancelled": DropReason.WORKFLOW_CANCELLED}


def _locked(run_id: int, uow: UnitOfWork) -> Run:
    """Run ``run_id`` with its workflow (its router reads it), the run's row
    locked in ``uow``'s block."""
    run = Run.objects.select_for_update(of=("self",)).select_related("workflow").get(pk=run_id)
    uow.mark_locked()
    return run


def _stop_unfinished_steps(run: Run, reason: DropReason, uow: UnitOfWork) -> None:
    router = router_for(run, uow=uow)
    for step in run.steps.exclude(status__in=Step.TERMINAL).exclude(kind=Step.Kind.COORDINATOR):
        store().end_step(step, Step.Status.CANCELLED)
        router.close(step.step_id, reason)


class _Read(NamedTuple):
    """What an end read of its run's steps under the run's lock: the writes
    it may leave out (a run's usual end, after its coordinator's finalize,
    makes neither)."""

    resuming: bool  # some step is being resumed
    coordinator_closed: bool  # the coordinator's mailbox is closed (finalize): nothing waits in it


# An end that read nothing: every write is made.
_UNREAD = _Read(resuming=True, coordinator_closed=False)


def _end_run(run: Run, uow: UnitOfWork, read: _Read = _UNREAD) -> None:
    run.finished = timezone.now()
    run.coordinator_busy = False
    # The coordinator lives as long as its run and ends the way the run did.
    # A coordinator that did not end completed says why, unless it had said already.
    ended = coordinator_end(run.status)
    why = run.error if ended != Step.Status.COMPLETED else ""
    # Never a full save of the run: the counters on its row moved while we
    # emitted events. The result as read under the lock, or as its finish
    # round gave it. What else the end closes is read with it: most runs
    # leave none of it.
    end = RunEnd(run.status, run.error, run.result, run.finished, ended, why)
    left = store().end_run(run.pk, end)
    if read.resuming:
        store().end_resumes(run)
    if not read.coordinator_closed:
        # A closed mailbox holds nothing unread: closing it drops what waits,
        # and every later send to it drops.
        router_for(run, uow=uow).close(COORDINATOR, DropReason.TARGET_TERMINAL)
    if left.calls or left.executions:
        # A worker still running one of its calls finds it closed and writes nothing after the end.
        stop_unfinished_calls(run.pk, f"the run ended {run.status}", uow, cancelled=run.status == Run.Status.CANCELLED)
    if left.approvals:
        # Work that ended needs no decision any more; its lapses come before the end.
        lapse_pending(run.pk, f"the run ended {run.status}", uow)
    uow.sink.emit(RuntimeEvent.of(WorkflowEnd(status=run.status, result=run.result, error=run.error)))
    uow.flush()
    metrics.run_ended(run)
    if run.trace_context:  # the run's invoke_workflow span (its process traced when it was made)
        span = (run.trace_context, run.pk, run.workflow.name, run.status, run.created)
        transaction.on_commit(lambda: telemetry.end_workflow(*span))
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
        transaction.on_commit(partial(do_cancel_run, child, reason))


def lapse_pending(run_id: int, reason: str, uow: UnitOfWork, *, step_id: str | None = None) -> None:
    """Lapse the pending approvals of a step that ended (or, without
    ``step_id``, of a run that ended): approved, a call would still run.
    Each lapse is an event and a gated call gets the refusal as its result.
    Call in ``uow``'s block, with the run's lock held."""
    # A created tool's approval outlives its run: later runs are what it is for.
    pending = Approval.objects.filter(run_id=run_id, status=Approval.Status.PENDING).exclude(
        kind=Approval.Kind.NEW_TOOL
    )
    if step_id is not None:
        pending = pending.filter(step_id=step_id)
    for approval in pending.select_for_update():
        close_approval(approval, Approval.Status.LAPSED, reason, uow)


def close_approval(approval: Approval, status: str, reason: str, uow: UnitOfWork) -> None:
    """Reject or lapse: the workflow ends blocked, or the call is refused;
    a question's call is told that no answer came."""
    if approval.kind == Approval.Kind.QUESTION:
        lapse_question(approval, reason, uow)
        return
    decision: Literal["reject", "lapse"] = "reject" if status == Approval.Status.REJECTED else "lapse"
    decided = approval_decided(approval, decision, reason)
    settle_approval(approval, status, reason, machine.decide(machine.UNREAD, decided), uow)


def approval_decided(
    approval: Approval, decision: Literal["approve", "reject", "lapse"], reason: str = "", approvals: int = 0
) -> ApprovalDecided:
    """What the state machine is told of a decision on ``approval``
    (``approvals``: the approve decisions so far, this one included)."""
    kind: Literal["workflow", "tool"] = "workflow" if approval.kind == Approval.Kind.WORKFLOW else "tool"
    return ApprovalDecided(kind, decision, reason, approvals, approval.required_approvals)


def settle_approval(approval: Approval, status: str, reason: str, decisions: tuple, uow: UnitOfWork) -> None:
    """Record how ``approval`` ended (``status``, and ``reason`` for a
    rejection or lapse) and apply what the state machine decides follows
    it (machine.decide with ApprovalDecided: agents/core/gates.py):
    the run starts or ends blocked, the call runs or is refused. Its events
    go through ``uow`` (open, its block holding the run's lock)."""
    store().settle_approval(approval, status, reason)
    if status == Approval.Status.LAPSED:
        uow.sink.emit(RuntimeEvent.of(ApprovalLapsed(approval_id=approval.pk, reason=reason), approval.step_id))
    if approval.kind == Approval.Kind.NEW_TOOL:
        settle_created_tool(approval, status, uow)  # no run or call waits on it
        return
    for decision in decisions:
        if isinstance(decision, gates.StartRun):
            # Claimed here, once: the run leaves awaiting_approval exactly one time.
            if store().approve_run_start(approval.run_id):
                store().mark_approval_executed(approval.pk)
                queue.send_after_commit(queue.START_RUN, approval.run_id)
        elif isinstance(decision, gates.RunApprovedCall):
            queue.send_after_commit(queue.EXECUTE_APPROVED_CALL, approval.pk)
        elif isinstance(decision, machine.EndRun):
            uow.flush()  # the end writes its events in a block of its own
            end_run(approval.run_id, decision)
        elif isinstance(decision, gates.RefuseCall) and approval.tool_call is not None:
            text = failure_text(
                decision.reason, RetryHint("domain_rejection", "replan", question="Is there a safer way?")
            )
            delivered = deliver_result(
                approval.tool_call,
                text,
                status=ToolCall.Status.BLOCKED,
                error_kind="domain_rejection",
                event=ToolResult,
                event_data={"approval_id": approval.pk, "status": status},
            )
            if delivered is not None:
                uow.sink.emit(delivered)
