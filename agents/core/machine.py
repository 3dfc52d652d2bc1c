"""The orchestration state machine: (run state, what happened) -> decisions.

Pure, like Temporal's workflow task or DBOS's ``_core.py``: runs/ reads a
run's state, tells this module what happened, and applies what it decides
(start these steps, stop these, wake the coordinator, end the run). Nothing
here reads a database or the clock.

What happened, and what follows:

- ``RunStarted``, ``CoordinatorIdle`` (a wake routed the mail and went idle),
  ``StepsChanged`` (a loop moved on, a resume ended): a full pass.
- ``StepEnded`` completed: the same decision as a full pass, reached by
  looking at the finished step's dependents only, unless a step outside them
  was already ready (held by a cap): then the full pass decides.
- ``StepEnded`` failed or cancelled: first the failure policy (its dependents
  cancelled or skipped, or with ``abort`` every unfinished step cancelled),
  then a full pass.

Dependents wait while the coordinator is busy or has mail to route (a
message the finished step sent for them is in their inbox before their first
turn). A coordinator that can spawn workers is woken to plan first, and when
every step is done it is woken to finish; ``run_end`` then gives the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from agents.core.ready import TERMINAL, iteration_keys, ready

StepStatus = Literal["pending", "running", "completed", "failed", "skipped", "cancelled"]
FailurePolicy = Literal["cascade", "skip-dependents", "abort"]


# -- state -------------------------------------------------------------------------


class StepState(NamedTuple):
    """A step or a repeat-until loop of a run (never its coordinator). A
    named tuple: a run's state is built from every step row after each step
    ends (a 500-step run: 500 of these), and a named tuple is made in about
    a third of a frozen dataclass's time."""

    runtime_id: str
    status: str = "pending"
    depends_on: tuple[str, ...] = ()
    kind: Literal["step", "loop"] = "step"
    limits: tuple[tuple[str, int], ...] = ()
    resuming: bool = False
    position: int = 0
    error: str = ""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class CoordinatorState:
    busy: bool = False
    has_mail: bool = False
    plans_first: bool = False  # it can spawn workers and has not planned yet


@dataclass(frozen=True)
class RunState:
    """``steps`` in the workflow's order: ready steps start in that order
    (a forEach loop's iterations as its list goes). ``steps_may_be_added``:
    a repeat-until loop or a coordinator that spawns workers can add steps
    while the run goes on."""

    status: str
    steps: tuple[StepState, ...]
    coordinator: CoordinatorState = CoordinatorState()
    max_running: int = 5
    on_step_failure: FailurePolicy = "cascade"
    steps_may_be_added: bool = False

    def step(self, runtime_id: str) -> StepState:
        return next(step for step in self.steps if step.runtime_id == runtime_id)

    def with_status(self, changes: Mapping[str, str]) -> RunState:
        steps = tuple(s._replace(status=changes[s.runtime_id]) if s.runtime_id in changes else s for s in self.steps)
        return replace(self, steps=steps)


# -- what happened -----------------------------------------------------------------


@dataclass(frozen=True)
class RunStarted:
    pass


@dataclass(frozen=True)
class StepEnded:
    """``step_id`` ended with ``status`` (the state already shows it)."""

    step_id: str
    status: str


@dataclass(frozen=True)
class CoordinatorIdle:
    pass


@dataclass(frozen=True)
class StepsChanged:
    pass


Happening = RunStarted | StepEnded | CoordinatorIdle | StepsChanged


# -- decisions ---------------------------------------------------------------------


@dataclass(frozen=True)
class StartSteps:
    """Start ``step_ids`` (each pending -> running once). ``needs_run_lock``:
    starts that race could pass a cap, so the caller decides again under the
    run's lock; without it, a conditional UPDATE per step is enough."""

    step_ids: tuple[str, ...]
    needs_run_lock: bool = True


@dataclass(frozen=True)
class StopSteps:
    """A failure policy's effect: ``step_ids`` end ``status``; their mail
    drops as ``drop``; ``aborted``: the whole run was aborted."""

    step_ids: tuple[str, ...]
    status: Literal["cancelled", "skipped"]
    drop: Literal["target_terminal", "workflow_cancelled"]
    aborted: bool = False


@dataclass(frozen=True)
class WakeCoordinator:
    reason: Literal["plan", "finish"]


@dataclass(frozen=True)
class EndRun:
    """End the run ``status``: from ``run_end`` when every step is done; a
    deadline fails it and a refused approval blocks it (agents/core/gates.py)."""

    status: Literal["completed", "partial", "failed", "blocked"]
    error: str = ""


Decision = StartSteps | StopSteps | WakeCoordinator | EndRun


# -- the machine -------------------------------------------------------------------


def decide(state: RunState, happened: Happening) -> tuple[Decision, ...]:
    """What follows ``happened`` in a run in ``state``."""
    if state.status != "running":
        return ()
    decisions: list[Decision] = []
    finished: str | None = None
    if isinstance(happened, StepEnded):
        if happened.status in ("failed", "cancelled"):
            stop = stop_after_failure(state, happened.step_id)
            if stop.step_ids:
                decisions.append(stop)
                state = state.with_status(dict.fromkeys(stop.step_ids, stop.status))
        elif happened.status == "completed":
            finished = happened.step_id
    if state.coordinator.busy or state.coordinator.has_mail:
        return tuple(decisions)
    start = starts_after(state, finished) if finished is not None else full_pass(state)
    if start:
        decisions.append(StartSteps(start, needs_run_lock=not caps_cannot_bind(state)))
    if all_done(state):
        decisions.append(WakeCoordinator("finish"))
    elif state.coordinator.plans_first:
        decisions.append(WakeCoordinator("plan"))
    return tuple(decisions)


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
        and all(status.get(dep, "pending") == "completed" for dep in s.depends_on)
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


def all_done(state: RunState) -> bool:
    """Every step terminal and none being resumed."""
    return all(s.terminal and not s.resuming for s in state.steps)


def stop_after_failure(state: RunState, stopped: str) -> StopSteps:
    """onStepFailure after ``stopped`` failed or was cancelled: cascade (its
    pending dependents, directly or through others, are cancelled),
    skip-dependents (skipped), abort (every unfinished step is cancelled, its
    later mail dropped as workflow-cancelled)."""
    if state.on_step_failure == "abort":
        affected = tuple(s.runtime_id for s in state.steps if not s.terminal and s.runtime_id != stopped)
        return StopSteps(affected, "cancelled", "workflow_cancelled", aborted=True)
    status: Literal["cancelled", "skipped"] = "cancelled" if state.on_step_failure == "cascade" else "skipped"
    return StopSteps(dependents_of(state, stopped), status, "target_terminal")


def dependents_of(state: RunState, step_id: str) -> tuple[str, ...]:
    """Pending steps that depend on ``step_id``, directly or through others,
    in the order they are found."""
    blocked = {step_id}
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
    chosen = ready(steps, _status(state), max_running=state.max_running, among=among)
    return tuple(s.runtime_id for s in chosen)
