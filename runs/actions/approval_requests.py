"""Asking for approval: a pending Approval for a destructive workflow or a
gated tool call, and the calls with effects a workflow's approval covers
(``planned_actions``, ``bound_calls``). Deciding: runs/actions/approvals.py."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.events.tool_events import ApprovalRequested
from agents.llm.scripted import placeholders, render_call
from agents.spec import WorkflowSpec
from agents.tools.builtin.shell import destructive_reason
from agents.tools.mcp.config import server_of
from agents.tools.registry import call_key, has_effects
from runs.actions.catalog import REGISTRY, workflow_spec
from runs.actions.notifications import queue_notices
from runs.models import Approval, Run
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork


def arguments_hash(subject: dict[str, Any]) -> str:
    """A stable hash of what is approved: the workflow or tool, and its arguments."""
    text = json.dumps(subject, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ApprovalAsked:
    """What an approval asks a person: its ``kind``, ``what`` is to run and
    ``why`` it needs approving, the ``subject`` its hash binds (the workflow
    or tool and its arguments), the ``arguments`` shown, the step asking
    (none for a run's start) and the calls with effects it covers."""

    kind: str
    what: str
    why: str
    subject: dict[str, Any]
    arguments: dict[str, Any]
    step_id: str = ""
    actions: list[dict[str, Any]] = field(default_factory=list)


def request_approval(run: Run, asked: ApprovalAsked, sink: EventSink | None = None) -> Approval:
    """Create a pending approval for what ``asked`` says and say so in the
    run's events (through ``sink``, a turn's, else a unit of work of its
    own). Call inside the transaction that pauses the work."""
    policy = workflow_spec(run.workflow).approval
    approval = store().create_approval(
        {
            "run": run,
            "kind": asked.kind,
            "step_id": asked.step_id,
            "what": asked.what,
            "why": asked.why,
            "arguments": asked.arguments,
            "actions": asked.actions,
            "arguments_hash": arguments_hash(asked.subject),
            "requested_by": run.created_by,
            "required_approvals": policy.approvers,
            "expires_at": timezone.now() + timedelta(seconds=policy.expires_after) if policy.expires_after else None,
        }
    )
    # "actions" is stored only when there are some.
    requested = ApprovalRequested(
        approval_id=approval.pk,
        kind=asked.kind,
        what=asked.what,
        why=asked.why,
        arguments=asked.arguments,
        **({"actions": asked.actions} if asked.actions else {}),
    )
    if sink is not None:
        sink.emit(RuntimeEvent.of(requested, asked.step_id))
    else:
        with UnitOfWork(run.pk) as uow:
            uow.sink.emit(RuntimeEvent.of(requested, asked.step_id))
    queue_notices(approval)
    return approval


def request_workflow_approval(run: Run, sink: EventSink | None = None) -> Approval:
    """Ask for approval to start ``run``, of a destructive workflow; its
    event through ``sink`` (the run's unit of work's), else a unit of work
    of its own (request_approval)."""
    spec = workflow_spec(run.workflow)
    actions = planned_actions(spec, run.inputs)
    subject: dict[str, Any] = {"workflow": spec.name, "version": run.workflow.version, "inputs": run.inputs}
    if actions:
        subject["actions"] = actions
    asked = ApprovalAsked(
        kind=Approval.Kind.WORKFLOW,
        what=f"run workflow {spec.name} v{run.workflow.version}",
        why=f"{spec.name} is marked destructive",
        subject=subject,
        arguments=dict(run.inputs),
        actions=actions,
    )
    return request_approval(run, asked, sink)


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
    builtin = REGISTRY.get(tool)
    if builtin is not None:
        return has_effects(builtin)
    # An MCP tool (server__tool) may do anything; a workflow offered as a
    # tool starts a run that passes its own gate.
    return server_of(tool) is not None
