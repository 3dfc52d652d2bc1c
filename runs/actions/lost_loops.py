"""A repeat-until loop whose next move was lost with its task: its last
iteration ended, and the task that follows (end_iteration, judge_loop or
next_iteration) never ran, so no step of the loop is running and nothing
would ever end it. Resume (runs/actions/recovery.py) queues that task
again; each of the three does nothing if what follows the iteration is
under way already (``followed``), so a task that was not lost but late
finds nothing to do."""

from __future__ import annotations

from typing import Literal

from runs import queue
from runs.actions.containers import iteration_of, iteration_prefix
from runs.models import Run, Step

Followed = Literal["started", "judged", "judging", "waiting"]


def followed(run: Run, loop_id: str, iteration: int) -> Followed | None:
    """What follows iteration ``iteration`` of loop ``loop_id`` so far: its
    next iteration's steps exist, its judge answered, its judge was asked,
    the loop waits out its delay; None: nothing yet."""
    if run.steps.filter(step_id__startswith=f"{loop_id}.{iteration + 1}.").exists():
        return "started"
    events = run.events.filter(step_id=loop_id)
    if events.filter(type="loop_judged", data__iteration=iteration).exists():
        return "judged"
    if events.filter(type="loop_judge", data__iteration=iteration).exists():
        return "judging"
    waits = events.filter(type="message", data__reason="loop-delay")
    if waits.filter(data__text__endswith=f"before iteration {iteration + 1}").exists():
        return "waiting"
    return None


def requeue_lost_loops(run: Run) -> list[str]:
    """Queue again, after commit, the task each running repeat-until loop of
    ``run`` waits on once its last iteration ended (call under the run's
    lock). Returns those loops' ids."""
    nudged = []
    for loop in run.steps.filter(kind=Step.Kind.LOOP, status=Step.Status.RUNNING):
        members = list(run.steps.filter(step_id__startswith=f"{loop.step_id}.").values_list("step_id", "status"))
        if not members:
            continue
        last = max(iteration_of(iteration_prefix(step_id, loop.step_id)) for step_id, _ in members)
        prefix = f"{loop.step_id}.{last}."
        iteration = [(step_id, status) for step_id, status in members if step_id.startswith(prefix)]
        if any(status not in Step.TERMINAL for _, status in iteration):
            continue
        state = followed(run, loop.step_id, last)
        if state == "started":
            continue
        if state in ("judged", "waiting"):
            queue.send_after_commit(queue.NEXT_ITERATION, loop.pk, last)
        elif state == "judging":
            queue.send_after_commit(queue.JUDGE_LOOP, loop.pk, last)
        else:
            queue.send_after_commit(queue.END_ITERATION, run.pk, iteration[-1][0])
        nudged.append(loop.step_id)
    return nudged
