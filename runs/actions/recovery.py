"""Getting a running run moving again when its work was lost (a worker died
holding a turn, a task was dropped): re-enqueue what should be in flight.

Every task this sends is safe to run twice: turns are claimed by a
conditional UPDATE on the step's turn counter, the coordinator's wake by its
busy flag, so a duplicate of work that was not lost finds nothing to do (at
worst a model is asked twice and one answer is thrown away).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.events.run_events import RunResumed
from runs import queue
from runs.actions.common import dispatch_after_commit
from runs.actions.lost_loops import requeue_lost_loops
from runs.actions.tool_tasks import queued_calls
from runs.models import Run, Step, ToolCall
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork
from runs.store.wakes import request_coordinator_wake


def do_resume_run(run_id: int, reason: str) -> list[str]:
    """Re-enqueue the next turn of every running step that is not waiting on a
    tool call, the task of every queued call, the task a repeat-until loop
    whose iteration ended waits on, and wake the coordinator. Returns the
    step ids nudged (such loops' ids included); a run that is not running
    is left alone."""
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.lock_run()
        run = Run.objects.get(pk=run_id)
        if run.status != Run.Status.RUNNING:
            return []
        waiting = set(ToolCall.objects.filter(run=run, status__in=ToolCall.PENDING).values_list("step_id", flat=True))
        # Calls whose task the broker lost run now; a duplicate finds them claimed.
        dispatch_after_commit(queued_calls(run_id))
        running = [
            step for step in run.steps.filter(kind=Step.Kind.STEP, status=Step.Status.RUNNING) if step.pk not in waiting
        ]
        if running:
            # Marked queued (Step.turn_queued): if these tasks are lost too, the sweeper queues them again.
            store().mark_turns_queued([step.pk for step in running], timezone.now())
        queue.queue_after_commit(queue.RUN_STEP_TURN, [(step.pk, step.turns + 1) for step in running])
        resuming = list(run.steps.filter(resuming=True))
        queue.queue_after_commit(queue.RESUME_STEP, [(step.pk,) for step in resuming])
        nudged = [step.step_id for step in [*running, *resuming]]
        nudged += requeue_lost_loops(run)  # a loop's end_iteration, judge_loop or next_iteration
        # A wake that died with its worker left the flag set, a wake task the
        # broker lost its mark; the next wake takes over (a double drain is
        # caught and rolled back).
        store().reset_coordinator(run_id)
        request_coordinator_wake(run_id)
        uow.sink.emit(RuntimeEvent.of(RunResumed(reason=reason, steps=nudged)))
    return nudged


def do_resume_after_restart(reason: str = "zenweb restarted") -> list[int]:
    """Get the live runs of an embedded zenweb going again after a restart.

    Its broker lived in the process: every queued task went with it, and the
    leases the old process held are nobody's now (a lease would otherwise
    keep a turn from the new worker for ZENWEB_LEASE_SECONDS). Hand the
    leases back, queue again the calls that were running, start the pending
    runs and resume the running ones. Returns the ids of the runs touched.
    Only for a process that is the only worker of its database."""
    store().hand_back_live_leases()
    pending = list(Run.objects.filter(status=Run.Status.PENDING).values_list("pk", flat=True))
    for run_id in pending:
        queue.send(queue.START_RUN, run_id)
    running = list(Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", flat=True))
    for run_id in running:
        do_resume_run(run_id, reason)
    return pending + running
