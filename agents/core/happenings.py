"""What can happen in a run: what runs/ tells ``decide``
(agents/core/machine.py). A new rule starts as a new happening here, a new
case in ``decide``, and the decisions it returns (agents/core/decisions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    """A loop moved on, a resume ended: steps may start that could not."""


@dataclass(frozen=True)
class CoordinatorFinished:
    """The coordinator said its last word on a run whose steps are all
    done (its finish wake, or a finalize it had called before)."""


@dataclass(frozen=True)
class RunFailed:
    """Something the run cannot go past: its coordinator's error, a start
    that could not be made, a workflow that could not be run."""

    error: str


@dataclass(frozen=True)
class RunCancelled:
    """A person, the command line or a parent run's end cancelled the run."""

    reason: str


@dataclass(frozen=True)
class ApprovalDecided:
    """A decision on an approval: ``approvals`` counts the approve decisions
    so far, this one included; ``required`` how many it needs (two under
    the two-person rule). A lapse is the expiry passing with no decision."""

    kind: Literal["workflow", "tool"]
    decision: Literal["approve", "reject", "lapse"]
    reason: str = ""
    approvals: int = 0
    required: int = 1


@dataclass(frozen=True)
class DeadlinePassed:
    """``deadline``: the run's (``options.timeout``, or a budget spent) or
    a step's (``options.stepTimeout``); ``why`` says which and by how much."""

    deadline: Literal["run", "step"]
    why: str
    step_id: str = ""


Happening = (
    RunStarted
    | StepEnded
    | CoordinatorIdle
    | StepsChanged
    | CoordinatorFinished
    | RunFailed
    | RunCancelled
    | ApprovalDecided
    | DeadlinePassed
)
