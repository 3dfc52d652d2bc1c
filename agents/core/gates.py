"""The rules of approvals and deadlines: what follows a person's decision
on an approval, and a deadline passing. ``decide`` (agents/core/machine.py)
calls them; runs/ applies what they decide.

- ``ApprovalDecided``: a workflow's approval, once it has its approvals,
  starts the run (``StartRun``); rejected or lapsed, the run ends
  ``blocked``. A tool call's approval runs the call with exactly the
  approved arguments (``RunApprovedCall``), or refuses it with the reason as
  the call's result (``RefuseCall``), which the step's model reads and can
  plan around. Fewer approvals than required: nothing yet.
- ``DeadlinePassed``: the run's ``timeout`` or budget ends it ``failed``;
  a step's ``stepTimeout`` fails that step (``FailStep``), and the failure
  policy then follows from ``decide`` with ``StepEnded(failed)``.
"""

from __future__ import annotations

from agents.core.decisions import EndRun, FailStep, RefuseCall, RunApprovedCall, StartRun
from agents.core.happenings import ApprovalDecided, DeadlinePassed

__all__ = [
    "ApprovalDecided",
    "DeadlinePassed",
    "EndRun",
    "FailStep",
    "RefuseCall",
    "RunApprovedCall",
    "StartRun",
    "after_approval",
    "after_deadline",
]

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
