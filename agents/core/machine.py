"""The orchestration state machine: (run state, what happened) -> decisions.

Pure, like Temporal's workflow task or DBOS's ``_core.py``: runs/ reads a
run's state, tells ``decide`` what happened, and applies every decision it
returns (start these steps, stop these, wake the coordinator, end the run).
Nothing here reads a database or the clock. ``decide`` is the one entry:
each happening (agents/core/happenings.py) is one case of it, answered by
one rule, here or in ``gates.py``, with decisions (agents/core/decisions.py).

What happened, and what follows:

- ``RunStarted``, ``CoordinatorIdle`` (a wake routed the mail and went idle),
  ``StepsChanged`` (a loop moved on, a resume ended): a full pass.
- ``StepEnded`` completed: the same decision as a full pass, reached by
  looking at the finished step's dependents only, unless a step outside them
  was already ready (held by a cap): then the full pass decides.
- ``StepEnded`` failed or cancelled: first the failure policy (its dependents
  cancelled or skipped, or with ``abort`` every unfinished step cancelled),
  then a full pass.
- ``CoordinatorFinished``: the run ends with ``run_end``'s status, or
  failed if its coordinator owed workers it never spawned; while a step is
  pending or running (a worker it spawned as it finished) nothing: the run
  goes on, and that step's end wakes the coordinator to finish again.
- ``RunFailed``, ``RunCancelled``: the run ends ``failed`` or ``cancelled``.
- ``ApprovalDecided``, ``DeadlinePassed``: ``gates.py``.
- ``TurnDue``, ``TurnAnswered`` (a step's turn: maxTurns, the tool caps,
  wake cycles and the hold timeout): ``turns.py``.
- ``ForwardToEnded`` (the coordinator forwards to a step that ended): a
  resume, or the message drops: ``resumes.py``.
- ``CoordinatorWoke``: plan, route its mail (within its wake-cycle cap),
  or finish the run; ``CoordinatorAnswered``: whether a round was its
  last word, and ends the run; ``WorkerAsked``: whether a spawn is
  refused: ``wakes.py``.

``IterationEnded`` (a repeat-until loop's iteration ended): the loop ends,
its judge is asked, or its next iteration starts: ``loops.py``.

``QuestionClosed`` (a question a step asked a person was answered, or
lapsed): the waiting call's result, or the answer refused: ``questions.py``.

``AttemptFailed`` (a running step failed): it runs again while it has
``retries`` left, else it fails and the failure policy follows: ``attempts.py``.

A step about to start whose ``condition`` (CEL) is not true is skipped
(``SkipStep``; its dependents go on) or, when it fails to evaluate, failed
with the failure policy after it: ``conditions.py``.

Dependents wait while the coordinator is busy or has mail to route (a
message the finished step sent for them is in their inbox before their first
turn). A coordinator that can spawn workers is woken to plan first, and when
every step is done it is woken to finish. An ended run decides nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Literal, assert_never

from agents.core import attempts, conditions, gates, loops, questions, resumes, turns, wakes
from agents.core.decisions import Decision, EndRun, FailStep, SkipStep, StartSteps, StopSteps, WakeCoordinator
from agents.core.happenings import (
    ApprovalDecided,
    AttemptFailed,
    CoordinatorAnswered,
    CoordinatorFinished,
    CoordinatorIdle,
    CoordinatorWoke,
    DeadlinePassed,
    ForwardToEnded,
    Happening,
    IterationEnded,
    QuestionClosed,
    RunCancelled,
    RunFailed,
    RunStarted,
    StepEnded,
    StepsChanged,
    TurnAnswered,
    TurnDue,
    WorkerAsked,
)
from agents.core.ready import DONE, iteration_keys, ready, scheduled
from agents.core.state import UNREAD, CoordinatorState, FailurePolicy, RunState, StepState, StepStatus, all_done

__all__ = [
    "CoordinatorFinished",
    "CoordinatorIdle",
    "CoordinatorState",
    "Decision",
    "EndRun",
    "FailurePolicy",
    "Happening",
    "RunCancelled",
    "RunFailed",
    "RunStarted",
    "RunState",
    "StartSteps",
    "StepEnded",
    "StepState",
    "StepStatus",
    "StepsChanged",
    "StopSteps",
    "UNREAD",
    "WakeCoordinator",
    "all_done",
    "decide",
]


def decide(state: RunState, happened: Happening) -> tuple[Decision, ...]:
    """What follows ``happened`` in a run in ``state``: one case per happening."""
    match happened:
        case RunStarted() | CoordinatorIdle() | StepsChanged():
            return _schedule(state, finished=None)
        case StepEnded():
            return after_step_end(state, happened)
        case CoordinatorWoke() | CoordinatorAnswered() | WorkerAsked():
            return wakes.after_coordinator(state, happened)
        case CoordinatorFinished() | RunFailed() | RunCancelled():
            return _run_ends(state, happened)
        case ApprovalDecided() | QuestionClosed():
            return _after_person(happened)
        case DeadlinePassed():
            return gates.after_deadline(happened)
        case TurnDue() | TurnAnswered():
            return turns.after_turn_event(happened)
        case ForwardToEnded():
            return resumes.after_forward(happened)
        case IterationEnded() | AttemptFailed():
            return _again_or_end(happened)
        case _:
            assert_never(happened)


def _after_person(happened: ApprovalDecided | QuestionClosed) -> tuple[Decision, ...]:
    """What follows a person's decision on an approval (``gates.py``) or
    the close of a question a step asked one (``questions.py``)."""
    if isinstance(happened, ApprovalDecided):
        return gates.after_approval(happened)
    return questions.after_question(happened)


def _again_or_end(happened: IterationEnded | AttemptFailed) -> tuple[Decision, ...]:
    """Whether a loop runs another iteration (``loops.py``) or a failed step
    another attempt (``attempts.py``), or what ends it."""
    if isinstance(happened, IterationEnded):
        return loops.after_iteration(happened)
    return attempts.after_failed_attempt(happened)


# A workflow whose coordinator must plan workers (coordinator.requireWorkers)
# fails with this when its steps are all done and it planned none.
NO_WORKERS = "coordinator: no worker was spawned, and this workflow's coordinator must plan workers (requireWorkers)"


def _run_ends(state: RunState, happened: CoordinatorFinished | RunFailed | RunCancelled) -> tuple[EndRun, ...]:
    """A run that has not ended ends: after its coordinator's finish with
    ``run_end``'s status (failed if it owed workers), unless a step is still
    to run; after a failure failed, after a cancel cancelled."""
    if state.ended:
        return ()
    if isinstance(happened, CoordinatorFinished) and any(not s.terminal for s in state.steps):
        return ()
    if isinstance(happened, CoordinatorFinished) and happened.owes_workers:
        return (EndRun("failed", NO_WORKERS),)
    if isinstance(happened, RunFailed):
        return (EndRun("failed", happened.error),)
    if isinstance(happened, RunCancelled):
        return (EndRun("cancelled", happened.reason),)
    return (run_end(state),)


def after_step_end(state: RunState, ended: StepEnded) -> tuple[Decision, ...]:
    """A failed or cancelled step: the failure policy, then a full pass over
    the state it leaves; a completed one: what its dependents start."""
    if state.status != "running":
        return ()
    if ended.status == "completed":
        return _schedule(state, finished=ended.step_id)
    if ended.status not in ("failed", "cancelled"):
        return _schedule(state, finished=None)
    stop = stop_after_failure(state, ended.step_id)
    if not stop.step_ids:
        return _schedule(state, finished=None)
    return (stop, *_schedule(state.with_status(dict.fromkeys(stop.step_ids, stop.status)), finished=None))


def _schedule(state: RunState, finished: str | None) -> tuple[Decision, ...]:
    """What starts and whether the coordinator wakes, ``finished`` the step
    whose completion this follows (None: a full pass)."""
    if state.status != "running" or state.coordinator.busy or state.coordinator.has_mail:
        return ()
    decisions: list[Decision] = []
    start = starts_after(state, finished) if finished is not None else full_pass(state)
    unmet = conditions.first_unmet(state, start) if start and state.conditions else None
    if unmet is not None:
        return _after_unmet(state, unmet)
    if start:
        decisions.append(StartSteps(start, needs_run_lock=not caps_cannot_bind(state)))
    if all_done(state):
        decisions.append(WakeCoordinator("finish"))
    elif state.coordinator.plans_first:
        decisions.append(WakeCoordinator("plan"))
    return tuple(decisions)


def _after_unmet(state: RunState, unmet: SkipStep | FailStep) -> tuple[Decision, ...]:
    """A step that would start and whose condition is not true: skipped,
    and a full pass over what that frees (its dependents go on); or failed
    (the condition did not evaluate), with the failure policy after it."""
    ended = (unmet.step_id, *unmet.others)
    if isinstance(unmet, SkipStep):
        return (unmet, *_schedule(state.with_status(dict.fromkeys(ended, "skipped")), finished=None))
    steps = tuple(s._replace(status="failed", error=unmet.error) if s.runtime_id in ended else s for s in state.steps)
    failed = replace(state, steps=steps)
    if state.status != "running":
        return (unmet,)
    stop = stop_after_failure(failed, *ended)
    if not stop.step_ids:
        return (unmet, *_schedule(failed, finished=None))
    return (unmet, stop, *_schedule(failed.with_status(dict.fromkeys(stop.step_ids, stop.status)), finished=None))


def full_pass(state: RunState) -> tuple[str, ...]:
    """Every step that may start now."""
    return _ready(state, among=None)


def starts_after(state: RunState, finished: str) -> tuple[str, ...]:
    """What may start now that ``finished`` completed: the same as
    ``full_pass``, deciding on the finished step's dependents only unless a
    step outside them was ready already (held by a cap, or by the
    coordinator's mail): then on everything."""
    dependents = {s.runtime_id for s in state.steps if finished in s.depends_on}
    status = _status(state)
    held = any(
        s.kind == "step"
        and s.status == "pending"
        and s.runtime_id not in dependents
        and all(status.get(dep, "pending") in DONE for dep in s.depends_on)
        for s in state.steps
    )
    return _ready(state, among=None if held else dependents)


def caps_cannot_bind(state: RunState) -> bool:
    """Whether no way of starting ready steps, in any order and by any
    number of racing workers, can pass a cap: no step can be added, no
    forEach loop has more unfinished iterations than its cap (a loop's
    iterations all exist from its start, so no more than those can ever
    run at once), and the unfinished steps can be covered by at most
    ``max_running`` dependency chains. Steps that run at once never depend
    on each other, so at most one per chain runs."""
    unfinished = [s for s in state.steps if s.kind == "step" and not s.terminal]
    if state.steps_may_be_added or not _loop_caps_cannot_bind(unfinished):
        return False
    # A greedy cover: a step extends the chain one of its dependencies ends,
    # else starts one. Any cover bounds how many can run at once.
    tails: set[str] = set()
    for step in unfinished:
        extended = next((dep for dep in step.depends_on if dep in tails), None)
        if extended is not None:
            tails.discard(extended)
        tails.add(step.runtime_id)
        if len(tails) > state.max_running:
            return False
    return True


def _loop_caps_cannot_bind(unfinished: list[StepState]) -> bool:
    """No forEach loop among ``unfinished`` steps has more unfinished
    iterations than its cap."""
    open_iterations: dict[str, set[str]] = {}
    caps: dict[str, int] = {}
    for step in unfinished:
        for key, (group, cap) in zip(iteration_keys(step), step.limits, strict=True):
            open_iterations.setdefault(group, set()).add(key)
            caps[group] = cap
    return all(len(keys) <= caps[group] for group, keys in open_iterations.items())


def stop_after_failure(state: RunState, stopped: str, *also: str) -> StopSteps:
    """onStepFailure after ``stopped`` failed or was cancelled: cascade (its
    pending dependents, directly or through others, are cancelled),
    skip-dependents (skipped), abort (every unfinished step is cancelled, its
    later mail dropped as workflow-cancelled)."""
    if state.on_step_failure == "abort":
        affected = tuple(s.runtime_id for s in state.steps if not s.terminal and s.runtime_id not in (stopped, *also))
        return StopSteps(affected, "cancelled", "workflow_cancelled", aborted=True)
    status: Literal["cancelled", "skipped"] = "cancelled" if state.on_step_failure == "cascade" else "skipped"
    return StopSteps(dependents_of(state, stopped, *also), status, "target_terminal")


def dependents_of(state: RunState, step_id: str, *also: str) -> tuple[str, ...]:
    """Pending steps that depend on ``step_id`` (or ``also``), directly or
    through others, in the order they are found."""
    blocked = {step_id, *also}
    found: list[str] = []
    changed = True
    while changed:
        changed = False
        for step in state.steps:
            if step.status == "pending" and step.runtime_id not in found and blocked & set(step.depends_on):
                found.append(step.runtime_id)
                blocked.add(step.runtime_id)
                changed = True
    return tuple(found)


def run_end(state: RunState) -> EndRun:
    """zenflow's status rule for a run whose steps are all done: any failed
    or cancelled step makes it partial (if some step completed) or failed;
    skipped steps do not count against it. The error names each failed step."""
    bad = [s for s in state.steps if s.status in ("failed", "cancelled")]
    if not bad:
        return EndRun("completed")
    completed = any(s.status == "completed" for s in state.steps)
    error = "\n".join(f"step {s.runtime_id} failed: {s.error}" for s in bad if s.status == "failed")
    return EndRun("partial" if completed else "failed", error)


def _status(state: RunState) -> dict[str, str]:
    return {s.runtime_id: s.status for s in state.steps}


def _ready(state: RunState, among: set[str] | None) -> tuple[str, ...]:
    steps = [s for s in state.steps if s.kind == "step"]
    order = None
    if state.scheduler != "dependency-first":
        busy = Counter(s.agent for s in steps if s.status == "running")

        def order(candidates: list[StepState]) -> list[StepState]:
            return scheduled(candidates, state.scheduler, lambda s: s.agent, busy)

    chosen = ready(steps, _status(state), max_running=state.max_running, among=among, order=order)
    return tuple(s.runtime_id for s in chosen)
