"""Approvals: the gate in front of destructive work.

A destructive workflow waits as ``awaiting_approval`` before it starts; a
call to a tool on the workflow's approval list waits (only its step does)
until a person decides. Deciding needs the ``runs.decide_approval``
permission and a reason, and covers exactly the arguments shown (by hash).
Nobody approves their own request (unless ZENWEB_ALLOW_SELF_APPROVAL
allows it where one approval is required); with ``approval: {approvers: 2}``
two different people must approve; with ``expiresAfter`` a request lapses.
Approved work is claimed once (``executed``), so approving twice or a
redelivered task never runs it twice.

A workflow's approval binds its effects: it shows the calls with effects
(commands, file writes, MCP calls) that its agents' scripts will make, with
the run's inputs filled in (``planned_actions``), and only those run on it.
Any other such call in the run (one a model composes, one a message asks
for) waits for an approval of its own (``ToolContext.bound``), so no message
widens what was approved. A rejected or lapsed workflow ends
``blocked`` with the reason; a rejected tool call tells the model why.

Asking: runs/actions/approval_requests.py; closing (rejected or lapsed,
which can block a run): ending.py.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import telemetry
from agents.core import machine
from agents.events import Event as RuntimeEvent
from agents.events.tool_events import ApprovalDecided, ToolResult
from agents.tools.errors import RetryHint, failure_text
from runs.actions.approval_requests import arguments_hash
from runs.actions.catalog import workflow_spec
from runs.actions.common import store_artifacts
from runs.actions.ending import approval_decided, close_approval, settle_approval
from runs.actions.pending import deliver_result
from runs.actions.tool_host import stored_call_context
from runs.actions.tooling import step_tools
from runs.models import Approval, ApprovalDecision, Run, Step, ToolCall
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork

PERMISSION = "runs.decide_approval"


class ApprovalError(Exception):
    """A decision that cannot be taken; the message says why."""


def do_decide(approval_id: int, user, decision: str, reason: str, seen_hash: str | None = None) -> Approval:
    """Record one person's decision; raise ApprovalError saying why not."""
    if not user.has_perm(PERMISSION):
        raise ApprovalError("deciding approvals needs the approve permission (runs.decide_approval)")
    reason = (reason or "").strip()
    if not reason:
        raise ApprovalError("a reason is required")
    if decision not in ApprovalDecision.Decision.values:
        raise ApprovalError(f"decision must be approve or reject, not {decision!r}")
    run_id = Approval.objects.values_list("run_id", flat=True).get(pk=approval_id)
    # A lapse is recorded in its own transaction: the refusal below must not undo it.
    _lapse_if_expired(approval_id, run_id)
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.lock_run()
        approval = Approval.objects.select_for_update().select_related("run__workflow").get(pk=approval_id)
        _refuse_unless_open(approval)
        if seen_hash and seen_hash != approval.arguments_hash:
            raise ApprovalError("the arguments changed since you looked at them: review them again")
        if approval.decisions.filter(user=user).exists():
            raise ApprovalError("you already decided on this approval")
        if decision == "approve" and approval.requested_by_id == user.pk:
            _refuse_self_approval(approval)
        decided_by = {"approval": approval, "user": user, "decision": decision, "reason": reason}
        store().add_approval_decision({**decided_by, "arguments_hash": approval.arguments_hash})
        approvals = approval.decisions.filter(decision="approve").count()
        decided = ApprovalDecided(
            approval_id=approval.pk,
            by=user.get_username(),
            decision=decision,
            reason=reason,
            approvals=approvals,
            required=approval.required_approvals,
        )
        uow.sink.emit(RuntimeEvent.of(decided, approval.step_id))
        telemetry.run_event(
            approval.run.trace_context,
            "approval_decided",
            {
                "zenweb.approval.id": approval.pk,
                "zenweb.approval.decision": decision,
                "zenweb.step.id": approval.step_id,
            },
        )
        if decision == "reject":
            close_approval(approval, Approval.Status.REJECTED, f"rejected by {user.get_username()}: {reason}", uow)
        else:
            follows = machine.decide(machine.UNREAD, approval_decided(approval, "approve", approvals=approvals))
            if follows:  # else it waits for more approvals
                settle_approval(approval, Approval.Status.APPROVED, "", follows, uow)
    return approval


def _refuse_unless_open(approval: Approval) -> None:
    """Raise ApprovalError unless ``approval`` waits for an approve or a reject."""
    if approval.status != Approval.Status.PENDING:
        raise ApprovalError(f"approval {approval.pk} is already {approval.status}")
    if approval.kind == Approval.Kind.QUESTION:
        raise ApprovalError(f"approval {approval.pk} is a question: answer it, it is not approved or rejected")


def decision_refusal(user, approval: Approval) -> str:
    """Why ``user`` may not decide ``approval`` now, by the rules ``do_decide``
    applies; "" if they may. For pages, which offer Approve and Reject only to
    those who may: the requester is refused both on their own request (unless
    the operator allows self-approval there), though ``do_decide`` would take
    their rejection, since they can cancel their run instead. Reads
    ``approval.decisions`` (prefetched by the caller, for a list)."""
    if not user.has_perm(PERMISSION):
        return "deciding approvals needs the approve permission"
    if approval.status != Approval.Status.PENDING:
        return f"approval {approval.pk} is already {approval.status}"
    if approval.kind == Approval.Kind.QUESTION:
        return "a question is answered, not approved"
    if any(decision.user_id == user.pk for decision in approval.decisions.all()):
        return "you already decided on this approval"
    if approval.requested_by_id == user.pk:
        try:
            _refuse_self_approval(approval)
        except ApprovalError as exc:
            return str(exc)
    return ""


def _refuse_self_approval(approval: Approval) -> None:
    """The person who started the run approves its request only where the
    operator allows it (ZENWEB_ALLOW_SELF_APPROVAL, for single-person
    installs), and never under the two-person rule."""
    if approval.required_approvals > 1:
        raise ApprovalError("with the two-person rule nobody approves their own request")
    if not settings.ZENWEB_ALLOW_SELF_APPROVAL:
        raise ApprovalError(
            "nobody approves their own request: another approver must decide"
            " (ZENWEB_ALLOW_SELF_APPROVAL=1 allows it on a single-person install)"
        )


def do_lapse_expired() -> int:
    """Lapse every pending approval past its expiry; returns how many."""
    expired = Approval.objects.filter(status=Approval.Status.PENDING, expires_at__lte=timezone.now())
    return sum(_lapse_if_expired(pk, run_id) for pk, run_id in expired.values_list("pk", "run_id"))


def _lapse_if_expired(approval_id: int, run_id: int) -> bool:
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.lock_run()
        approval = Approval.objects.select_for_update().select_related("run__workflow").get(pk=approval_id)
        if approval.status != Approval.Status.PENDING or not _expired(approval):
            return False
        close_approval(approval, Approval.Status.LAPSED, _lapse_reason(approval), uow)
        return True


def _lapse_reason(approval: Approval) -> str:
    return f"lapsed: no decision before {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC"


def _expired(approval: Approval) -> bool:
    return approval.expires_at is not None and approval.expires_at <= timezone.now()


def do_execute_approved_call(approval_id: int) -> None:
    """Run an approved tool call with exactly the approved arguments, once."""
    approval = Approval.objects.select_related("tool_call").get(pk=approval_id)
    call = approval.tool_call
    if approval.kind != Approval.Kind.TOOL or call is None:
        return
    with transaction.atomic(), UnitOfWork(approval.run_id) as uow:
        uow.lock_run()
        if not store().mark_approval_executed(approval.pk, only_approved=True):
            return
        run = Run.objects.select_related("workflow", "created_by").get(pk=approval.run_id)
        step: Step = Step.objects.get(pk=call.step_id)
        if step.is_terminal or run.is_terminal:
            # Approved, then the step or run ended before the call could run.
            delivered = deliver_result(
                call,
                failure_text(
                    f"not run: step {step.step_id} ended {step.status} before the approved call could run",
                    RetryHint("domain_rejection", "finish"),
                ),
                status=ToolCall.Status.BLOCKED,
                error_kind="domain_rejection",
                event=ToolResult,
                event_data={"approval_id": approval.pk, "status": "approved", "ok": False},
            )
            if delivered is not None:
                uow.sink.emit(delivered)
            return
        if arguments_hash({"tool": call.name, "arguments": approval.arguments}) != approval.arguments_hash:
            raise ApprovalError(f"approval {approval.pk}: the stored arguments do not match what was approved")
        spec = workflow_spec(run.workflow)
        registry, tools = step_tools(spec, step)
        ctx = stored_call_context(call, run, step, uow=uow, destructive_approved=True)
        with telemetry.in_run(run.trace_context):  # its execute_tool span in the run's trace
            outcome = registry.call(ctx, call.name, json.dumps(approval.arguments), tools)
        store().set_call_bounds(call.pk, outcome.bounds.as_data() if outcome.bounds else None)
        store_artifacts(call, outcome.artifacts)
        delivered = deliver_result(
            call,
            outcome.text,
            status=ToolCall.Status.DONE if outcome.ok else ToolCall.Status.FAILED,
            error_kind=outcome.error_kind or "",
            omitted=outcome.omitted,
            event=ToolResult,
            event_data={"approval_id": approval.pk, "status": "approved", "ok": outcome.ok},
        )
        if delivered is not None:
            uow.sink.emit(delivered)
