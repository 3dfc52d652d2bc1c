"""Commands: free text -> the coordinator's workflow selection -> a run, and
the COORDINATOR_RESULT that answers it (docs/commands-and-approvals.md; the answer of a run
as it stands: runs/actions/command_results.py).

The coordinator (the workflow handler) sees the catalog and the command and
answers a COORDINATOR_SELECTION; ``agents.handler.decide`` checks it (unknown
workflow, mode, inputs). Anything but a clean selection is answered at once
and starts nothing. A selected workflow starts a run (or waits for approval
when destructive); its result is filled in when the run ends. The handler
never retries a failed workflow: it reports it.
"""

from __future__ import annotations

import logging

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.events.run_events import CatalogCompacted
from agents.handler import (
    CatalogEntry,
    CoordinatorResult,
    SelectionError,
    SelectionPlan,
    decide,
    parse_selection,
    plan_selection,
)
from agents.llm import ProviderError, build_provider
from runs.actions.catalog import InputError, workflow_spec
from runs.actions.command_results import NEEDS_APPROVAL
from runs.actions.lifecycle import TooManyRuns, active_runs_refusal, do_create_run
from runs.actions.offers import offered_workflows
from runs.models import Command, Event, Run, Workflow
from runs.store.events import DjangoEventSink

log = logging.getLogger(__name__)


def do_command(text: str, *, user=None, mode: str = "chat") -> Command:
    """Answer a command: select a workflow, check it, start it. Never raises
    for a bad command; the answer says what was wrong. Raises TooManyRuns
    (and stores no command) when ``user`` may start no run now, before the
    model is asked or when the run would be one too many: a 429, not an
    answer."""
    text = text.strip()
    workflows = offered_workflows()
    entries = [CatalogEntry.of(workflow_spec(w)) for w in workflows.values()]
    plan = plan_selection(text, entries, mode)
    if plan.compacted:
        log.info("command %r: catalog compacted (%s)", text[:80], plan.event_data())
    command = Command(text=text, mode=mode, created_by=user, compact_catalog=plan.compacted)
    refusal = active_runs_refusal(user)
    if refusal:  # before the model is asked: its selection could start nothing
        raise TooManyRuns(refusal)
    try:
        completion = build_provider(None).complete(plan.request)
        selection = parse_selection(completion.content, text)
    except ProviderError as exc:
        # An endpoint that answered with an error status is no network error.
        error = str(exc) if exc.status is not None else f"Network error: {exc}"
        return _answer(command, CoordinatorResult(command_received=text, status="error", error=error))
    except SelectionError as exc:
        return _answer(command, CoordinatorResult(command_received=text, status="error", error=str(exc)))
    command.selection = selection.model_dump(mode="json", by_alias=True, exclude_none=True)
    decision = decide(selection, entries, mode)
    if decision.result is not None:
        return _answer(command, decision.result)
    workflow = workflows[decision.entry.name]
    try:
        _start(command, workflow, decision.args, plan, user=user, mode=mode)
    except TooManyRuns:
        raise
    except InputError as exc:
        # The arguments the model read from the command do not fit the
        # workflow's inputs (a forEach list that is not one, say).
        refused = CoordinatorResult(
            command_received=text,
            workflow_selected=workflow.name,
            workflow_args=decision.args,
            status="error",
            error=f"{workflow.name}: {exc}",
        )
        return _answer(command, refused)
    return command


def _start(command: Command, workflow: Workflow, args: dict, plan: SelectionPlan, *, user, mode: str) -> None:
    """Start the selected workflow's run and store the command's answer, in
    one transaction."""
    with transaction.atomic():
        run = do_create_run(workflow, args, user=user, command=command.text, mode=mode)
        if plan.compacted:
            # The run keeps the record: a command row has no event log.
            DjangoEventSink(run.pk).emit(RuntimeEvent.of(CatalogCompacted(**plan.event_data())))
        command.run = run
        result = _pending_result(command, run)
        command.result = result.model_dump(mode="json", by_alias=True)
        command.status = result.status
        command.save()


def catalog_compaction(command: Command) -> dict | None:
    """The ``catalog_compacted`` event data of a command's run, if it has one."""
    if not command.compact_catalog or command.run_id is None:
        return None
    return Event.objects.filter(run_id=command.run_id, type="catalog_compacted").values_list("data", flat=True).first()


def _answer(command: Command, result: CoordinatorResult) -> Command:
    command.result = result.model_dump(mode="json", by_alias=True)
    command.status = result.status
    command.save()
    return command


def _pending_result(command: Command, run: Run) -> CoordinatorResult:
    waiting = run.status == Run.Status.AWAITING_APPROVAL
    return CoordinatorResult(
        command_received=command.text,
        workflow_selected=run.workflow.name,
        workflow_args=run.inputs,
        status="blocked" if waiting else "success",
        error=NEEDS_APPROVAL if waiting else None,
        requires_approval=waiting,
        result=None,
    )
