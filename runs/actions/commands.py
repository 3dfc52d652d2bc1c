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
    CommandContext,
    CoordinatorResult,
    CoordinatorSelection,
    SelectionError,
    SelectionPlan,
    decide,
    parse_selection,
    plan_selection,
    with_query,
)
from agents.llm import ProviderError, build_provider
from runs.actions.catalog import InputError, workflow_spec
from runs.actions.command_results import NEEDS_APPROVAL, workflow_args
from runs.actions.lifecycle import TooManyRuns, active_runs_refusal, do_create_run
from runs.actions.model_calls import traced
from runs.actions.offers import offered_workflows
from runs.models import Command, Event, Run, Workflow
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)


def do_command(
    text: str, *, user=None, mode: str = "chat", chosen: str | None = None, context: CommandContext | None = None
) -> Command:
    """Answer a command: select a workflow, check it, start it. Never raises
    for a bad command; the answer says what was wrong. Raises TooManyRuns
    (and stores no command) when ``user`` may start no run now, before the
    model is asked or when the run would be one too many: a 429, not an
    answer. ``chosen`` names the workflow the person picked from an answer's
    clarification options: the handler reads the command for its inputs.
    ``context`` (the Executor's goal focus, workflow hint, original query)
    is stored on the command and shown to the model with it."""
    text = text.strip()
    stored_context = context.model_dump(exclude_none=True) if context is not None else None
    workflows = offered_workflows()
    entries = [CatalogEntry.of(workflow_spec(w)) for w in workflows.values()]
    if chosen is not None:
        entries = [entry for entry in entries if entry.name == chosen]
        if not entries:
            not_offered = CoordinatorResult(command_received=text, status="error", error=f"Unknown workflow: {chosen}")
            return _answer(Command(text=text, mode=mode, created_by=user, context=stored_context), not_offered)
    plan = plan_selection(text, entries, mode, chosen=chosen, context=stored_context)
    if plan.compacted:
        log.info("command %r: catalog compacted (%s)", text[:80], plan.event_data())
    command = Command(text=text, mode=mode, created_by=user, compact_catalog=plan.compacted, context=stored_context)
    refusal = active_runs_refusal(user)
    if refusal:  # before the model is asked: its selection could start nothing
        raise TooManyRuns(refusal)
    try:
        completion = traced(build_provider(None)).complete(plan.request)
        selection = parse_selection(completion.content, text)
    except ProviderError as exc:
        # An endpoint that answered with an error status is no network error.
        error = str(exc) if exc.status is not None else f"Network error: {exc}"
        return _answer(command, CoordinatorResult(command_received=text, status="error", error=error))
    except SelectionError as exc:
        return _answer(command, CoordinatorResult(command_received=text, status="error", error=str(exc)))
    selection.selection_reason = _reason(selection, chosen)
    command.selection = selection.model_dump(mode="json", by_alias=True, exclude_none=True)
    decision = decide(selection, entries, mode)
    if decision.entry is None:  # then a result to report
        assert decision.result is not None
        decision.result.selection_reason = selection.selection_reason
        return _answer(command, decision.result)
    return _start_or_refuse(command, workflows[decision.entry.name], decision.args, plan)


def _reason(selection: CoordinatorSelection, chosen: str | None) -> str | None:
    """Why the workflow was selected: what the model said, else that the
    person named it; None when nothing was selected."""
    if selection.selection_reason:
        return selection.selection_reason
    if chosen is not None:
        return f"name given: the person chose {chosen}"
    if selection.workflow_selected:
        return "the model selected it without saying why"
    return None


def do_give_inputs(earlier: Command, given: dict[str, str], *, user=None) -> Command:
    """Answer ``earlier`` (``needs_more_info``, or an input it found unclear)
    with the values the person gave for its missing inputs: a new command
    (its text the earlier one's with ``name=value`` added) that selects the
    same workflow with the inputs read before and ``given``, checked by
    ``decide`` as a model's selection is. The model is not asked again: the
    person said exactly what they mean. A list input takes comma-separated
    items. Raises TooManyRuns as ``do_command`` does."""
    result = CoordinatorResult.model_validate(earlier.result)
    text = " ".join([earlier.text, *(f"{name}={value}" for name, value in given.items())])
    command = Command(text=text, mode=earlier.mode, created_by=user, context=earlier.context)
    refusal = active_runs_refusal(user)
    if refusal:
        raise TooManyRuns(refusal)
    workflow = offered_workflows().get(result.workflow_selected or "")
    if workflow is None:
        gone = CoordinatorResult(
            command_received=text, status="error", error=f"Unknown workflow: {result.workflow_selected}"
        )
        return _answer(command, gone)
    entry = CatalogEntry.of(workflow_spec(workflow))
    # The earlier answer's inputs, not the mode and query it was given with.
    args = {name: value for name, value in result.workflow_args.items() if name in entry.inputs}
    for name, value in given.items():
        args[name] = [item.strip() for item in value.split(",") if item.strip()] if name in entry.list_inputs else value
    selection = CoordinatorSelection(
        command_received=text,
        workflow_selected=entry.name,
        workflow_args=args,
        status="selected",
        selection_reason=f"name given: inputs given for {entry.name}, which command {earlier.pk} selected",
    )
    command.selection = selection.model_dump(mode="json", by_alias=True, exclude_none=True)
    decision = decide(selection, [entry], earlier.mode)
    if decision.result is not None:
        return _answer(command, decision.result)
    return _start_or_refuse(command, workflow, decision.args, None)


def _start_or_refuse(command: Command, workflow: Workflow, args: dict, plan: SelectionPlan | None) -> Command:
    """Start the run of ``command``, or answer why its inputs do not fit."""
    try:
        _start(command, workflow, args, plan, user=command.created_by, mode=command.mode)
    except TooManyRuns:
        raise
    except InputError as exc:
        # The arguments the model read from the command do not fit the
        # workflow's inputs (a forEach list that is not one, say).
        refused = CoordinatorResult(
            command_received=command.text,
            workflow_selected=workflow.name,
            workflow_args=args,
            status="error",
            error=f"{workflow.name}: {exc}",
        )
        return _answer(command, refused)
    return command


def _start(command: Command, workflow: Workflow, args: dict, plan: SelectionPlan | None, *, user, mode: str) -> None:
    """Start the selected workflow's run and store the command's answer, in
    one transaction."""
    with transaction.atomic():
        run = do_create_run(workflow, args, user=user, command=command.text, mode=mode)
        if plan is not None and plan.compacted:
            # The run keeps the record: a command row has no event log.
            with UnitOfWork(run.pk) as uow:
                uow.sink.emit(RuntimeEvent.of(CatalogCompacted(**plan.event_data())))
        command.run = run
        result = _pending_result(command, run)
        command.result = result.model_dump(mode="json", by_alias=True)
        command.status = result.status
        store().save_command(command)


def catalog_compaction(command: Command) -> dict | None:
    """The ``catalog_compacted`` event data of a command's run, if it has one."""
    if not command.compact_catalog or command.run_id is None:
        return None
    return Event.objects.filter(run_id=command.run_id, type="catalog_compacted").values_list("data", flat=True).first()


def _answer(command: Command, result: CoordinatorResult) -> Command:
    """Store ``result`` as the command's answer, its ``workflow_args`` with
    the command's mode and original query as a run's have them."""
    original = (command.context or {}).get("original_query") or command.text
    result.workflow_args = with_query(result.workflow_args, mode=command.mode, original_query=original)
    command.result = result.model_dump(mode="json", by_alias=True)
    command.status = result.status
    store().save_command(command)
    return command


def _pending_result(command: Command, run: Run) -> CoordinatorResult:
    """The answer of a command whose run just started: ``running`` (final
    once the run ends, command_results.finish_command), or ``blocked`` while
    a destructive workflow waits for its approval."""
    waiting = run.status == Run.Status.AWAITING_APPROVAL
    return CoordinatorResult(
        command_received=command.text,
        workflow_selected=run.workflow.name,
        workflow_args=workflow_args(run, command),
        status="blocked" if waiting else "running",
        error=NEEDS_APPROVAL if waiting else None,
        requires_approval=waiting,
        result=None,
        selection_reason=(command.selection or {}).get("selection_reason"),
    )
