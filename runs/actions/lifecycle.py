"""A run's start: create it (or ask for its approval), then start it
(which steps start: runs/actions/scheduling.py; its end: ending.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agents import expansion, telemetry
from agents.events import Event as RuntimeEvent
from agents.events.run_events import WorkflowStart
from agents.handler import mode_refusal
from runs import metrics, queue
from runs.actions.approval_requests import request_workflow_approval
from runs.actions.catalog import InputError, check_inputs, not_run_yet, workflow_spec
from runs.actions.containers import create_steps
from runs.actions.ending import do_fail_run
from runs.actions.fork_reuse import fork_runtime, reuse_before_fork
from runs.actions.offers import NotOffered, start_refusal
from runs.actions.run_states import step_row
from runs.actions.scheduling import Eager, schedule_start
from runs.models import Run, Step, Workflow
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork


class TooManyRuns(InputError):
    """The person has ZENWEB_MAX_ACTIVE_RUNS runs under way already: a 429
    whose Retry-After is ``retry_after`` seconds (a run may end by then)."""

    retry_after = 30


def active_runs_refusal(user) -> str | None:
    """Why ``user`` may start no run now: as many of their runs are under
    way as ZENWEB_MAX_ACTIVE_RUNS allows (a run started by a tool call is
    its parent's work, not counted). None: they may."""
    limit = settings.ZENWEB_MAX_ACTIVE_RUNS
    if user is None or not limit:
        return None
    runs = Run.objects.filter(created_by=user, parent_tool_call__isnull=True).exclude(status__in=Run.TERMINAL)
    active = runs.count()
    if active < limit:
        return None
    return (
        f"you have {active} runs under way (pending, running or waiting for approval) and at most {limit} "
        "may be (ZENWEB_MAX_ACTIVE_RUNS): wait for one to end, or cancel one"
    )


def do_create_run(
    workflow: Workflow,
    inputs: Mapping[str, object],
    *,
    user=None,
    command: str = "",
    mode: str | None = None,
    ad_hoc: bool = False,
    fork: Mapping[str, object] | None = None,
) -> Run:
    """Create a pending run and have a worker start it after commit. A
    destructive workflow waits for approval first (``awaiting_approval``).
    ``mode`` is the person's (chat or code): a code-mode workflow refuses
    chat mode with InputError, as a command does. None (a caller that names
    the workflow itself: the CLI, the demo) takes the workflow's own.
    TooManyRuns (an InputError) when ``user`` has too many under way;
    NotOffered (one too) for a version people may not start (offers.py);
    ``ad_hoc`` (run_workflow FILE) starts the ad-hoc version it registered.
    ``fork``: the Run fields of a fork (runs/actions/forks.py).

    The count and the creation share one transaction under a lock on the
    person's row, so a burst of starts admits exactly the limit: on
    PostgreSQL SELECT ... FOR UPDATE, on SQLite the write lock every
    transaction takes at BEGIN (transaction_mode IMMEDIATE). What follows
    the creation is written through the new run's unit of work, in that
    transaction: its events published after commit."""
    refusal = None if ad_hoc and workflow.offer == Workflow.Offer.AD_HOC else start_refusal(workflow)
    if refusal:
        raise NotOffered(refusal)
    refusal = not_run_yet(workflow)
    if refusal:
        raise InputError(refusal)
    spec = workflow_spec(workflow)
    mode = mode or spec.mode
    refusal = mode_refusal(spec.name, spec.mode, mode)
    if refusal:
        raise InputError(refusal)
    values = check_inputs(spec, inputs)
    with transaction.atomic():
        if user is not None and settings.ZENWEB_MAX_ACTIVE_RUNS:
            _lock_person(user)
            refusal = active_runs_refusal(user)
            if refusal:
                raise TooManyRuns(refusal)
        made = {"workflow": workflow, "inputs": values, "created_by": user, "command": command, "mode": mode}
        made["trace_context"] = telemetry.new_run_context()
        made.update(fork or {})
        run = store().create_run(made)
        with UnitOfWork(run.pk) as uow:
            if spec.destructive:
                store().set_run_status(run, Run.Status.AWAITING_APPROVAL)
                request_workflow_approval(run, uow.sink)
            else:
                _start_after_commit(run)
    return run


def _start_after_commit(run: Run) -> None:
    """Queue the run's start when the transaction commits, the task's
    publish in the run's trace (the worker's spans of the start join it)."""

    def start() -> None:
        with telemetry.in_run(run.trace_context):
            queue.send(queue.START_RUN, run.pk)

    transaction.on_commit(start, robust=True)


def _lock_person(user) -> None:
    """Hold ``user``'s row until the transaction ends: their next start
    counts this one's run."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))


def do_start_run(run_id: int, worker: str | None = None) -> Eager | None:
    """Expand the workflow into steps, register their mailboxes, start the
    steps that are ready. A second delivery of the same task does nothing.

    ``worker``: the worker starting it, which takes what follows itself
    when it is one thing: the first turn of the one step that starts, or
    the coordinator's first wake (see scheduling.schedule); returned."""
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        run = store().start_run(run_id, timezone.now())
        if run is None:
            return None
        spec = workflow_spec(run.workflow)
        try:
            runtime = expansion.expand(spec, run.inputs)
        except expansion.ExpansionError as exc:
            create_steps(run, [], first=True)  # its coordinator, which ends with it
            error = f"could not start: {exc}"
            transaction.on_commit(lambda: do_fail_run(run_id, error))
            return None
        steps = create_steps(run, fork_runtime(run, runtime), first=True)
        started = WorkflowStart(
            workflow=spec.name,
            version=run.workflow.version,
            inputs=run.inputs,
            steps=[step.runtime_id for step in runtime],
            **_parent_of(run),
        )
        uow.sink.emit(RuntimeEvent.of(started))
        if run.forked_from_id:
            reuse_before_fork(run, steps, uow.sink)
        uow.flush()  # before the events of what starts
        metrics.run_started(spec.name)
        rows = [step_row(step) for step in steps if step.kind != Step.Kind.COORDINATOR]
        return schedule_start(run.pk, spec, rows, worker)


def _parent_of(run: Run) -> dict[str, Any]:
    call = run.parent_tool_call
    if call is None:
        return {}
    return {"parent_run_id": call.run_id, "parent_tool_call_id": call.tool_call_id}
