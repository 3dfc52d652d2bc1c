"""What follows a person's decision on an approval, and a deadline passing.

Pure, like ``machine.py``: runs/ records the decision or notices the
deadline, tells this module what happened, and applies what it decides.

- ``ApprovalDecided``: a workflow's approval, once it has its approvals,
  starts the run (``StartRun``); rejected or lapsed, the run ends
  ``blocked``. A tool call's approval runs the call with exactly the
  approved arguments (``RunApprovedCall``), or refuses it with the reason as
  the call's result (``RefuseCall``), which the step's model reads and can
  plan around. Fewer approvals than required: nothing yet.
- ``DeadlinePassed``: the run's ``timeout`` or budget ends it ``failed``;
  a step's ``stepTimeout`` fails that step (``FailStep``), and the failure
  policy then follows from ``machine.decide`` with ``StepEnded(failed)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agents.core.machine import EndRun

# -- what happened -----------------------------------------------------------------


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


# -- decisions ---------------------------------------------------------------------


@dataclass(frozen=True)
class StartRun:
    """A destructive workflow approved: the run leaves awaiting_approval, once."""


@dataclass(frozen=True)
class RunApprovedCall:
    """Run the approved tool call with exactly its approved arguments."""


@dataclass(frozen=True)
class RefuseCall:
    """The call is not run: ``reason`` is its result."""

    reason: str


@dataclass(frozen=True)
class FailStep:
    step_id: str
    error: str


GateDecision = StartRun | RunApprovedCall | RefuseCall | FailStep | EndRun


def after_approval(decided: ApprovalDecided) -> tuple[GateDecision, ...]:
    """What follows a decision on an approval (see the module's docstring)."""
    if decided.decision == "approve":
        if decided.approvals < decided.required:
            return ()
        return (StartRun(),) if decided.kind == "workflow" else (RunApprovedCall(),)
    if decided.kind == "workflow":
        return (EndRun("blocked", decided.reason),)
    return (RefuseCall(decided.reason),)


def after_deadline(passed: DeadlinePassed) -> tuple[GateDecision, ...]:
    """What follows a deadline passing: the run fails, or the step does."""
    if passed.deadline == "run":
        return (EndRun("failed", passed.why),)
    return (FailStep(passed.step_id, passed.why),)
