"""A run from start to end: create, start, schedule ready steps, finish,
fail, cancel. workflow_end is always a run's last event."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.db.models import Case, F, TextField, Value, When
from django.utils import timezone

from agents import scheduler
from agents.events import Event as RuntimeEvent
from agents.handler import mode_refusal
from agents.router import COORDINATOR, DropReason
from agents.spec import WorkflowSpec
from runs.actions.approvals import lapse_pending
from runs.actions.catalog import InputError, check_inputs, spec_of, workflow_spec
from runs.actions.children import cancel_children_after_commit
from runs.actions.commands import finish_command
from runs.actions.common import router_for
from runs.actions.containers import as_runtime, create_steps
from runs.actions.tool_tasks import stop_unfinished_calls
from runs.models import Run, Step, Workflow
from runs.store.events import DjangoEventSink
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import schedule_state
from runs.store.unit_of_work import UnitOfWork
from runs.store.wakes import request_coordinator_wake


def do_create_run(
    workflow: Workflow, inputs: Mapping[str, object], *, user=None, command: str = "", mode: str | None = None
) -> Run:
    """Create a pending run and have a worker start it after commit. A
    destructive workflow waits for approval first (``awaiting_approval``).
    ``mode`` is the person's (chat or code): a code-mode workflow refuses
    chat mode with InputError, as a command does. None (a caller that names
    the workflow itself: the CLI, the demo) takes the workflow's own."""
    from runs import tasks
    from runs.actions.approvals import request_workflow_approval

    spec = workflow_spec(workflow)
    mode = mode or spec.mode
    refusal = mode_refusal(spec.name, spec.mode, mode)
    if refusal:
        raise InputError(refusal)
    values = check_inputs(spec, inputs)
    with transaction.atomic():
        run = Run.objects.create(workflow=workflow, inputs=values, created_by=user, command=command, mode=mode)
        if spec.destructive:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.AWAITING_APPROVAL)
            run.status = Run.Status.AWAITING_APPROVAL
            request_workflow_approval(run)
        else:
            transaction.on_commit(lambda: tasks.start_run.delay(run.pk), robust=True)
    return run


def do_block_run(run_id: int, reason: str) -> None:
    """End a run whose destructive work was rejected or lapsed: ``blocked``."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        run.status = Run.Status.BLOCKED
        run.error = reason
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)


def do_start_run(run_id: int) -> None:
    """Expand the workflow into steps, register their mailboxes, start the
    steps that are ready. A second delivery of the same task does nothing."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, status=Run.Status.PENDING).update(
            status=Run.Status.RUNNING, started=timezone.now(), stuck_reason=""
        ):
            return
        run = Run.objects.select_related("workflow").get(pk=run_id)
        spec = workflow_spec(run.workflow)
        Step.objects.create(
            run=run,
            step_id=COORDINATOR,
            kind=Step.Kind.COORDINATOR,
            agent=COORDINATOR,
            status=Step.Status.RUNNING,
            started=timezone.now(),
        )
        try:
            runtime = scheduler.expand(spec, run.inputs)
        except scheduler.ExpansionError as exc:
            error = f"could not start: {exc}"
            transaction.on_commit(lambda: do_fail_run(run_id, error))
            return
        create_steps(run, runtime)
        DjangoEventSink(run.pk).emit(
            RuntimeEvent(
                "workflow_start",
                "",
                {
                    "workflow": spec.name,
                    "version": run.workflow.version,
                    "inputs": run.inputs,
                    "steps": [step.runtime_id for step in runtime],
                    **_parent_of(run),
                },
            )
        )
        schedule(run.pk)


def _parent_of(run: Run) -> dict[str, object]:
    call = run.parent_tool_call
    if call is None:
        return {}
    return {"parent_run_id": call.run_id, "parent_tool_call_id": call.tool_call_id}


SCHEDULING_FIELDS = ("run_id", "step_id", "kind", "agent", "status", "depends_on", "limits", "resuming", "position")


def schedule(run_id: int, state: tuple | None = None) -> None:
    """Start every pending step whose dependencies completed.

    Dependents wait while the coordinator has messages to route, so that a
    message a finished step sent for them is in their inbox before their
    first turn. When every step is done, the coordinator is woken to finish.
    ``state``: the run's flags as sql.schedule_state gives them, read
    under the run's lock by the transaction that just committed.
    """
    # This runs after every step's end. Most find no pending step (a
    # fan-out starts all its steps at once): they read the run's flags in
    # one query, without the run's lock, instead of every step of the run.
    state = _schedule_state(run_id, state)
    if state is None:
        return
    status, busy, has_mail, has_pending, all_steps_done, spec = state
    if status != Run.Status.RUNNING or busy or has_mail:
        return
    if has_pending:
        _start_ready_steps(run_id)
        return
    # Nothing to start. Reading without the lock is enough: every step's end
    # commits before it calls this, so the last one to end sees all done.
    if all_steps_done or _plans_first(run_id, spec):
        with transaction.atomic():
            request_coordinator_wake(run_id)


def _schedule_state(run_id: int, state: tuple | None = None) -> tuple | None:
    """The run's status and coordinator_busy, whether the coordinator has
    unread mail, a step is pending, and every step is done (``all_done``),
    and its workflow's spec (read by key: parsed specs are kept). Read
    unless ``state`` has them (sql.ScheduleState)."""
    state = state or schedule_state(run_id)
    if state is None:
        return None
    *flags, workflow_id, created = state
    return *flags, spec_of(workflow_id, created)


def _start_ready_steps(run_id: int) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("workflow").get(pk=run_id)
        if run.status != Run.Status.RUNNING or run.coordinator_busy or coordinator_has_mail(run.pk):
            return
        # Only what readiness needs: transcripts and outputs of a wide run
        # would cost more to load than everything else here.
        steps = list(_others(run_id).only(*SCHEDULING_FIELDS))
        status = {step.step_id: step.status for step in steps}
        pending = [as_runtime(step) for step in steps if step.kind == Step.Kind.STEP]
        by_id = {step.step_id: step for step in steps}
        max_running = workflow_spec(run.workflow).options.max_concurrency
        ready = scheduler.ready(pending, status, max_running=max_running)
        _start_steps(run, [by_id[runtime.runtime_id] for runtime in ready])
        if all_done(steps) or plans_first(run):
            request_coordinator_wake(run.pk)


def _others(run_id: int):
    """A run's steps and loops, everything but its coordinator, in the
    workflow's order: the scheduler starts ready steps in the order given,
    and a forEach loop's iterations must start as its list goes, not as
    their ids sort (deploy[10] before deploy[2])."""
    return Step.objects.filter(run_id=run_id).exclude(kind=Step.Kind.COORDINATOR).order_by("position")


def plans_first(run: Run) -> bool:
    """A coordinator that can spawn workers takes a plan wake before anything
    else; this is true until it has."""
    return _plans_first(run.pk, workflow_spec(run.workflow))


def _plans_first(run_id: int, spec: WorkflowSpec) -> bool:
    # Without a Run: building one (every field's default) cost more than
    # the rest of a fan-out step's scheduling.
    agent = spec.agents.get(COORDINATOR)
    if agent is None or "spawn_worker" not in agent.tools:
        return False
    return Step.objects.filter(run_id=run_id, step_id=COORDINATOR, turns=0).exists()


def all_done(steps: list[Step]) -> bool:
    """Every step terminal and none being resumed."""
    return all(step.is_terminal and not step.resuming for step in steps)


def _start_steps(run: Run, steps: list[Step]) -> None:
    """Start ``steps`` (pending, read with the run's lock held): one UPDATE
    and one statement of step_start events for them all (a fan-out starts a
    hundred at once), and each one's first turn queued after commit."""
    from runs import tasks

    if not steps:
        return
    now = timezone.now()
    # Marked queued with the first turn (Step.turn_queued): the sweeper queues it again if its task is lost.
    Step.objects.filter(pk__in=[step.pk for step in steps], status=Step.Status.PENDING).update(
        status=Step.Status.RUNNING, started=now, turn_queued=now
    )
    with UnitOfWork(run.pk) as uow:
        for step in steps:
            uow.sink.emit(RuntimeEvent("step_start", step.step_id, {"agent": step.agent}))
    tasks.queue_after_commit(tasks.run_step_turn, [(step.pk, 1) for step in steps])


def coordinator_has_mail(run_id: int) -> bool:
    """Messages wait, unread, in the coordinator's inbox."""
    return DjangoMailboxStore(run_id).unread_count(COORDINATOR) > 0


def do_finish_run(run_id: int) -> None:
    """End a run whose steps are all done, with zenflow's status rule: any
    failed or cancelled step makes it partial (if some step completed) or
    failed; skipped steps do not count against it."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        steps = list(run.steps.exclude(kind=Step.Kind.COORDINATOR).only("run", "step_id", "status", "error"))
        bad = [s for s in steps if s.status in (Step.Status.FAILED, Step.Status.CANCELLED)]
        completed = any(s.status == Step.Status.COMPLETED for s in steps)
        if not bad:
            run.status = Run.Status.COMPLETED
        else:
            run.status = Run.Status.PARTIAL if completed else Run.Status.FAILED
            failed = [s for s in bad if s.status == Step.Status.FAILED]
            if failed and not run.error:
                run.error = "\n".join(f"step {s.step_id} failed: {s.error}" for s in failed)
        _end_run(run)


def do_fail_run(run_id: int, error: str) -> None:
    """Stop a run that cannot go on: unfinished steps are cancelled."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        DjangoEventSink(run.pk).emit(RuntimeEvent("error", "", {"error": error}))
        _stop_unfinished_steps(run, DropReason.TARGET_TERMINAL)
        run.status = Run.Status.FAILED
        run.error = error
        _end_run(run)


def do_cancel_run(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel a run: running steps stop at their next turn boundary (their
    queued tasks find nothing to do), unread messages and every later send
    drop as workflow-cancelled. False if the run had already ended."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return False
        run.status = Run.Status.CANCELLED
        run.error = reason
        run.save(update_fields=["status", "error"])
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)
    return True


def _stop_unfinished_steps(run: Run, reason: DropReason) -> None:
    router = router_for(run.pk)
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


def _end_run(run: Run) -> None:
    run.finished = timezone.now()
    run.coordinator_busy = False
    # Never a full save: the counters on this row moved while we emitted events.
    run.save(update_fields=["status", "error", "finished", "coordinator_busy"])
    # The coordinator lives as long as its run and ends the way the run did.
    # A coordinator that did not end completed says why, unless it had said already.
    ended = _COORDINATOR_END[run.status]
    why = run.error if ended != Step.Status.COMPLETED else ""
    said = Case(When(error="", then=Value(why)), default=F("error"), output_field=TextField())
    run.steps.filter(kind=Step.Kind.COORDINATOR).update(status=ended, finished=run.finished, error=said)
    Step.objects.filter(run=run, resuming=True).update(resuming=False)
    router_for(run.pk).close(COORDINATOR, DropReason.TARGET_TERMINAL)
    # A worker still running one of its calls finds it closed and writes nothing after the end.
    stop_unfinished_calls(run.pk, f"the run ended {run.status}")
    # Work that ended needs no decision any more; its lapses come before the end.
    lapse_pending(run.pk, f"the run ended {run.status}")
    DjangoEventSink(run.pk).emit(
        RuntimeEvent("workflow_end", "", {"status": run.status, "result": run.result, "error": run.error})
    )
    cancel_children_after_commit(run)
    finish_command(run)
    if run.parent_tool_call_id:
        from runs import tasks

        transaction.on_commit(lambda: tasks.deliver_child_result.delay(run.pk), robust=True)
