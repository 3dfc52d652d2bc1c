"""A command's answer: the COORDINATOR_RESULT of its run as it stands,
stored on the command in the transaction that ends the run.

Its status is ``running`` while the run is under way; ``success``,
``error`` and ``blocked`` are read from how the run ended (or, for
``blocked`` with ``requires_approval``, from a run that waits for a
person's decision before it starts)."""

from __future__ import annotations

from typing import Any

from agents.criteria import check_constraints, check_criteria, failed
from agents.handler import Claim as ClaimData
from agents.handler import (
    CoordinatorResult,
    Finding,
    ToolRun,
    WorkflowOutcome,
    claims_problem,
    error_for_run,
    with_query,
)
from runs.actions.catalog import workflow_spec
from runs.models import Command, Run
from runs.store.sql import store

# What a destructive workflow waiting on a person reports (docs/commands-and-approvals.md).
NEEDS_APPROVAL = "Destructive operation requires explicit user approval"


def coordinator_result(run: Run, command: Command | None = None) -> CoordinatorResult:
    """The COORDINATOR_RESULT of a run as it stands; ``command``, the run's
    command if the caller has it, adds its context and selection reason."""
    text = command.text if command is not None else run.command
    claims = [
        ClaimData(
            claim=c.claim,
            confidence=c.confidence,
            source_name=c.source_name,
            source_domain=c.source_domain,
            url=c.url or None,
            title=c.title or None,
            source_type=c.source_type or "web",
            source_ref=c.source_ref or None,
            ttl=c.ttl or None,
        )
        for c in run.claims.all()
    ]
    tool_runs = [
        ToolRun(tool=name, status="success" if ok else "error", duration_ms=ms)
        for name, ok, ms in run.tool_calls.filter(counted=True).values_list("name", "ok", "duration_ms")
    ]
    base = {
        "command_received": text,
        "workflow_selected": run.workflow.name,
        "workflow_args": workflow_args(run, command),
        "claims": claims,
        "tool_runs": tool_runs,
        "selection_reason": (command.selection or {}).get("selection_reason") if command is not None else None,
    }
    if run.status == Run.Status.AWAITING_APPROVAL:
        return CoordinatorResult(**base, status="blocked", error=NEEDS_APPROVAL, requires_approval=True)
    if run.status == Run.Status.BLOCKED:
        return CoordinatorResult(**base, status="blocked", error=run.error, requires_approval=True)
    if run.status == Run.Status.COMPLETED:
        outcome = workflow_outcome(run, claims)
        criteria = check_criteria(workflow_spec(run.workflow).success_criteria, claims, text)
        constraints = check_constraints(text, claims)
        checked = base | {"result": outcome, "criteria": criteria, "constraints": constraints}
        problem = claims_problem(claims) or failed(criteria, constraints)
        if problem:
            return CoordinatorResult(**checked, status="blocked", error=problem, requires_retry=True)
        return CoordinatorResult(**checked, status="success")
    if run.is_terminal:
        partial = workflow_outcome(run, claims) if run.result or claims else None
        return CoordinatorResult(**base, status="error", error=error_for_run(run.status, run.error), result=partial)
    # Pending or running: nothing is known yet of how it ends.
    return CoordinatorResult(**base, status="running", result=None)


def workflow_args(run: Run, command: Command | None) -> dict[str, Any]:
    """The run's inputs, with the mode it runs in and the query it answers
    (the context's ``original_query``, else the command). An input of the
    same name is kept as given."""
    context = (command.context if command is not None else None) or {}
    original = context.get("original_query") or (command.text if command is not None else run.command)
    return with_query(run.inputs, mode=run.mode, original_query=original)


def workflow_outcome(run: Run, claims: list[ClaimData]) -> WorkflowOutcome:
    """What the run found (its claims), how many distinct sources they cite,
    how long it took and its final text."""
    findings = [
        Finding(claim=c.claim, url=c.url, source_name=c.source_name or None, confidence=c.confidence) for c in claims
    ]
    sources = {c.url or c.source_ref for c in claims if c.url or c.source_ref}
    duration = run.finished - run.started if run.started and run.finished else None
    return WorkflowOutcome(
        findings=findings,
        sources_visited=len(sources),
        duration_ms=int(duration.total_seconds() * 1000) if duration else 0,
        summary=run.result,
    )


def command_result(command: Command) -> CoordinatorResult:
    """A command's COORDINATOR_RESULT as it stands: its run's, if it started
    one, else the answer stored on it."""
    if command.run is not None:
        return coordinator_result(command.run, command)
    return CoordinatorResult.model_validate(command.result)


def finish_command(run: Run) -> None:
    """Store the final COORDINATOR_RESULT on the run's command, if it has one.
    Called in the transaction that ends the run."""
    command = Command.objects.filter(run=run).first()
    if command is None:
        return
    result = coordinator_result(run, command)
    command.result = result.model_dump(mode="json", by_alias=True)
    command.status = result.status
    store().set_command_result(command)
