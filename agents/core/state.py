"""A run's state as the orchestration rules read it (agents/core/machine.py
``decide``): its steps, its coordinator, its caps and failure policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, NamedTuple

from agents.core.ready import TERMINAL

StepStatus = Literal["pending", "running", "completed", "failed", "skipped", "cancelled"]
FailurePolicy = Literal["cascade", "skip-dependents", "abort"]
# A run's statuses once it has ended: nothing follows in it.
RUN_ENDED = frozenset({"completed", "partial", "failed", "cancelled", "blocked"})


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
    agent: str = ""

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
    while the run goes on. ``others_unfinished``: steps left out of
    ``steps`` (not read, where a prefilter found that none of them may
    start), some of them unfinished. ``conditions``: the CEL ``condition``
    of each pending step that has one (runtime id -> expression), and
    ``outputs`` the finished steps' outputs it reads (both empty, and never
    read, in a run none of whose pending steps has one)."""

    status: str
    steps: tuple[StepState, ...] = ()
    coordinator: CoordinatorState = CoordinatorState()
    max_running: int = 5
    on_step_failure: FailurePolicy = "cascade"
    steps_may_be_added: bool = False
    others_unfinished: bool = False
    conditions: Mapping[str, str] = field(default_factory=dict)
    outputs: Mapping[str, str] = field(default_factory=dict)
    scheduler: str = "dependency-first"  # the order ready steps start in (ready.scheduled)

    @property
    def ended(self) -> bool:
        return self.status in RUN_ENDED

    def step(self, runtime_id: str) -> StepState:
        return next(step for step in self.steps if step.runtime_id == runtime_id)

    def with_status(self, changes: Mapping[str, str]) -> RunState:
        steps = tuple(s._replace(status=changes[s.runtime_id]) if s.runtime_id in changes else s for s in self.steps)
        return replace(self, steps=steps)


def all_done(state: RunState) -> bool:
    """Every step terminal and none being resumed."""
    return not state.others_unfinished and all(s.terminal and not s.resuming for s in state.steps)


# A run's state not read: what the rules that read none (approvals,
# deadlines: agents/core/gates.py) are decided on.
UNREAD = RunState(status="")
