"""A command's answer: the COORDINATOR_RESULT of its run as it stands,
stored on the command in the transaction that ends the run.

Its status is ``running`` while the run is under way; ``success``,
``error`` and ``blocked`` are read from how the run ended (or, for
``blocked`` with ``requires_approval``, from a run that waits for a
person's decision before it starts)."""

from __future__ import annotations

from agents.handler import Claim as ClaimData
from agents.handler import (
    CoordinatorResult,
    ToolRun,
    claims_problem,
    error_for_run,
)
from runs.models import Command, Run

# What a destructive workflow waiting on a person reports (docs/commands-and-approvals.md).
NEEDS_APPROVAL = "Destructive operation requires explicit user approval"


def coordinator_result(run: Run, text: str | None = None) -> CoordinatorResult:
    """The COORDINATOR_RESULT of a run as it stands."""
    text = text if text is not None else run.command
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
        "workflow_args": run.inputs,
        "claims": claims,
        "tool_runs": tool_runs,
    }
    if run.status == Run.Status.AWAITING_APPROVAL:
        return CoordinatorResult(**base, status="blocked", error=NEEDS_APPROVAL, requires_approval=True)
    if run.status == Run.Status.BLOCKED:
        return CoordinatorResult(**base, status="blocked", error=run.error, requires_approval=True)
    if run.status == Run.Status.COMPLETED:
        problem = claims_problem(claims)
        if problem:
            return CoordinatorResult(**base, status="blocked", error=problem, requires_retry=True, result=run.result)
        return CoordinatorResult(**base, status="success", result=run.result)
    if run.is_terminal:
        return CoordinatorResult(**base, status="error", error=error_for_run(run.status, run.error), result=run.result)
    # Pending or running: nothing is known yet of how it ends.
    return CoordinatorResult(**base, status="running", result=None)


def command_result(command: Command) -> CoordinatorResult:
    """A command's COORDINATOR_RESULT as it stands: its run's, if it started
    one, else the answer stored on it."""
    if command.run is not None:
        return coordinator_result(command.run, command.text)
    return CoordinatorResult.model_validate(command.result)


def finish_command(run: Run) -> None:
    """Store the final COORDINATOR_RESULT on the run's command, if it has one.
    Called in the transaction that ends the run."""
    command = Command.objects.filter(run=run).first()
    if command is None:
        return
    result = coordinator_result(run, command.text)
    command.result = result.model_dump(mode="json", by_alias=True)
    command.status = result.status
    command.save(update_fields=["result", "status"])
