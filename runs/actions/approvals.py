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
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.llm.scripted import placeholders, render_call
from agents.spec import WorkflowSpec
from agents.tools.builtin.shell import destructive_reason
from agents.tools.errors import RetryHint, failure_text
from agents.tools.mcp.config import server_of
from agents.tools.registry import call_key, has_effects
from runs.actions.catalog import workflow_spec
from runs.actions.pending import deliver_result
from runs.models import Approval, ApprovalDecision, Run, Step, ToolCall
from runs.store.events import DjangoEventSink
from runs.store.sql import lock_run

PERMISSION = "runs.decide_approval"


class ApprovalError(Exception):
    """A decision that cannot be taken; the message says why."""


def arguments_hash(subject: dict[str, Any]) -> str:
    """A stable hash of what is approved: the workflow or tool, and its arguments."""
    text = json.dumps(subject, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def request_approval(
    run: Run,
    *,
    kind: str,
    what: str,
    why: str,
    subject: dict[str, Any],
    arguments: dict[str, Any],
    step_id: str = "",
    actions: list[dict[str, Any]] | None = None,
    sink: EventSink | None = None,
) -> Approval:
    """Create a pending approval and say so in the run's events (through
    ``sink``, a turn's, else written at once). Call inside the transaction
    that pauses the work."""
    policy = workflow_spec(run.workflow).approval
    approval = Approval.objects.create(
        run=run,
        kind=kind,
        step_id=step_id,
        what=what,
        why=why,
        arguments=arguments,
        actions=actions or [],
        arguments_hash=arguments_hash(subject),
        requested_by=run.created_by,
        required_approvals=policy.approvers,
        expires_at=timezone.now() + timedelta(seconds=policy.expires_after) if policy.expires_after else None,
    )
    (sink or DjangoEventSink(run.pk)).emit(
        RuntimeEvent(
            "approval_requested",
            step_id,
            {
                "approval_id": approval.pk,
                "kind": kind,
                "what": what,
                "why": why,
                "arguments": arguments,
                **({"actions": actions} if actions else {}),
            },
        )
    )
    return approval


def request_workflow_approval(run: Run) -> Approval:
    spec = workflow_spec(run.workflow)
    actions = planned_actions(spec, run.inputs)
    subject: dict[str, Any] = {"workflow": spec.name, "version": run.workflow.version, "inputs": run.inputs}
    if actions:
        subject["actions"] = actions
    return request_approval(
        run,
        kind=Approval.Kind.WORKFLOW,
        what=f"run workflow {spec.name} v{run.workflow.version}",
        why=f"{spec.name} is marked destructive",
        subject=subject,
        arguments=dict(run.inputs),
        actions=actions,
    )


def planned_actions(spec: WorkflowSpec, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls with effects the workflow's agents' scripts make, rendered
    as they will run with these inputs (shell commands quoted the same way).
    A call that uses anything but inputs (``$inbox``, ``$item``: known only
    at run time) is listed with ``at_run_time`` and is not approved here, as
    is each tool with effects of an agent with no script (a model's)."""
    variables = {name: str(value) for name, value in inputs.items()}
    actions: list[dict[str, Any]] = []
    for agent_name, agent in spec.agents.items():
        if not agent.script:
            # A model composes this agent's calls: each one with effects asks again.
            actions += [
                {"agent": agent_name, "tool": tool, "arguments": {}, "at_run_time": ["model"]}
                for tool in agent.tools
                if _has_effects(tool)
            ]
        for turn in agent.script:
            for call in turn.calls or []:
                if not _has_effects(call.tool):
                    continue
                later = sorted(placeholders(call.args) - set(variables))
                action: dict[str, Any] = {"agent": agent_name, "tool": call.tool}
                if later:
                    action |= {"arguments": call.args, "at_run_time": later}
                else:
                    action["arguments"] = render_call(call.tool, call.args, variables)
                    # A hint for the person deciding, not a check (shell.DESTRUCTIVE_PATTERNS).
                    looks_like = destructive_reason(str(action["arguments"].get("command", "")))
                    if call.tool == "run_shell" and looks_like:
                        action["looks_like"] = looks_like
                if action not in actions:
                    actions.append(action)
    return actions


def bound_calls(approvals: list[list[dict[str, Any]]]) -> frozenset[str]:
    """The call keys an approved workflow's actions allow (ToolContext.bound)."""
    return frozenset(
        call_key(action["tool"], action["arguments"])
        for actions in approvals
        for action in actions
        if not action.get("at_run_time")
    )


def _has_effects(tool: str) -> bool:
    from runs.actions.common import REGISTRY

    builtin = REGISTRY.get(tool)
    if builtin is not None:
        return has_effects(builtin)
    # An MCP tool (server__tool) may do anything; a workflow offered as a
    # tool starts a run that passes its own gate.
    return server_of(tool) is not None


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
    with transaction.atomic():
        lock_run(run_id)
        approval = Approval.objects.select_for_update().select_related("run__workflow").get(pk=approval_id)
        if approval.status != Approval.Status.PENDING:
            raise ApprovalError(f"approval {approval.pk} is already {approval.status}")
        if seen_hash and seen_hash != approval.arguments_hash:
            raise ApprovalError("the arguments changed since you looked at them: review them again")
        if approval.decisions.filter(user=user).exists():
            raise ApprovalError("you already decided on this approval")
        if decision == "approve" and approval.requested_by_id == user.pk:
            _refuse_self_approval(approval)
        ApprovalDecision.objects.create(
            approval=approval, user=user, decision=decision, reason=reason, arguments_hash=approval.arguments_hash
        )
        approvals = approval.decisions.filter(decision="approve").count()
        DjangoEventSink(run_id).emit(
            RuntimeEvent(
                "approval_decided",
                approval.step_id,
                {
                    "approval_id": approval.pk,
                    "by": user.get_username(),
                    "decision": decision,
                    "reason": reason,
                    "approvals": approvals,
                    "required": approval.required_approvals,
                },
            )
        )
        if decision == "reject":
            _close(approval, Approval.Status.REJECTED, f"rejected by {user.get_username()}: {reason}")
        elif approvals >= approval.required_approvals:
            _approve(approval)
    return approval


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


def lapse_pending(run_id: int, reason: str, *, step_id: str | None = None) -> None:
    """Lapse the pending approvals of a step that ended (or, without
    ``step_id``, of a run that ended): approved, a call would still run.
    Each lapse is an event and a gated call gets the refusal as its result.
    Call with the run's lock held."""
    pending = Approval.objects.filter(run_id=run_id, status=Approval.Status.PENDING)
    if step_id is not None:
        pending = pending.filter(step_id=step_id)
    for approval in pending.select_for_update():
        _close(approval, Approval.Status.LAPSED, reason)


def _lapse_if_expired(approval_id: int, run_id: int) -> bool:
    with transaction.atomic():
        lock_run(run_id)
        approval = Approval.objects.select_for_update().select_related("run__workflow").get(pk=approval_id)
        if approval.status != Approval.Status.PENDING or not _expired(approval):
            return False
        _close(approval, Approval.Status.LAPSED, _lapse_reason(approval))
        return True


def _lapse_reason(approval: Approval) -> str:
    return f"lapsed: no decision before {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC"


def _expired(approval: Approval) -> bool:
    return approval.expires_at is not None and approval.expires_at <= timezone.now()


def _approve(approval: Approval) -> None:
    from runs import tasks

    approval.status = Approval.Status.APPROVED
    approval.decided_at = timezone.now()
    approval.save(update_fields=["status", "decided_at"])
    if approval.kind == Approval.Kind.WORKFLOW:
        # Claimed here, once: the run leaves awaiting_approval exactly one time.
        if Run.objects.filter(pk=approval.run_id, status=Run.Status.AWAITING_APPROVAL).update(
            status=Run.Status.PENDING, destructive_approved=True
        ):
            Approval.objects.filter(pk=approval.pk).update(executed=True)
            run_id = approval.run_id
            transaction.on_commit(lambda: tasks.start_run.delay(run_id), robust=True)
    else:
        approval_id = approval.pk
        transaction.on_commit(lambda: tasks.execute_approved_call.delay(approval_id), robust=True)


def _close(approval: Approval, status: str, reason: str) -> None:
    """Reject or lapse: the workflow ends blocked, or the call is refused."""
    from runs.actions.lifecycle import do_block_run

    approval.status = status
    approval.reason = reason
    approval.decided_at = timezone.now()
    approval.save(update_fields=["status", "reason", "decided_at"])
    if status == Approval.Status.LAPSED:
        DjangoEventSink(approval.run_id).emit(
            RuntimeEvent("approval_lapsed", approval.step_id, {"approval_id": approval.pk, "reason": reason})
        )
    if approval.kind == Approval.Kind.WORKFLOW:
        do_block_run(approval.run_id, reason)
    elif approval.tool_call_id:
        text = failure_text(reason, RetryHint("domain_rejection", "replan", question="Is there a safer way?"))
        deliver_result(
            approval.tool_call,
            text,
            status=ToolCall.Status.BLOCKED,
            error_kind="domain_rejection",
            event="tool_result",
            event_data={"approval_id": approval.pk, "status": status},
        )


def do_execute_approved_call(approval_id: int) -> None:
    """Run an approved tool call with exactly the approved arguments, once."""
    from runs.actions.common import store_artifacts
    from runs.actions.tooling import step_tools, stored_call_context

    approval = Approval.objects.select_related("tool_call").get(pk=approval_id)
    call = approval.tool_call
    if approval.kind != Approval.Kind.TOOL or call is None:
        return
    with transaction.atomic():
        lock_run(approval.run_id)
        if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.APPROVED, executed=False).update(
            executed=True
        ):
            return
        run = Run.objects.select_related("workflow", "created_by").get(pk=approval.run_id)
        step: Step = Step.objects.get(pk=call.step_id)
        if step.is_terminal or run.is_terminal:
            # Approved, then the step or run ended before the call could run.
            deliver_result(
                call,
                failure_text(
                    f"not run: step {step.step_id} ended {step.status} before the approved call could run",
                    RetryHint("domain_rejection", "finish"),
                ),
                status=ToolCall.Status.BLOCKED,
                error_kind="domain_rejection",
                event="tool_result",
                event_data={"approval_id": approval.pk, "status": "approved", "ok": False},
            )
            return
        if arguments_hash({"tool": call.name, "arguments": approval.arguments}) != approval.arguments_hash:
            raise ApprovalError(f"approval {approval.pk}: the stored arguments do not match what was approved")
        spec = workflow_spec(run.workflow)
        registry, tools = step_tools(spec, step)
        ctx = stored_call_context(call, run, step, in_run=True, destructive_approved=True)
        outcome = registry.call(ctx, call.name, json.dumps(approval.arguments), tools)
        ToolCall.objects.filter(pk=call.pk).update(bounds=outcome.bounds.as_data() if outcome.bounds else None)
        store_artifacts(call, outcome.artifacts)
        deliver_result(
            call,
            outcome.text,
            status=ToolCall.Status.DONE if outcome.ok else ToolCall.Status.FAILED,
            error_kind=outcome.error_kind or "",
            omitted=outcome.omitted,
            event="tool_result",
            event_data={"approval_id": approval.pk, "status": "approved", "ok": outcome.ok},
        )
