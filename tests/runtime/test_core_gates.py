"""Approvals and deadlines in the state machine (agents/core/gates.py),
without Django."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core.gates import (
    ApprovalDecided,
    DeadlinePassed,
    FailStep,
    RefuseCall,
    RunApprovedCall,
    StartRun,
    after_approval,
    after_deadline,
)
from agents.core.machine import EndRun


def test_an_approved_workflow_starts_its_run():
    assert after_approval(ApprovalDecided("workflow", "approve", approvals=1, required=1)) == (StartRun(),)


def test_under_the_two_person_rule_one_approval_starts_nothing():
    assert after_approval(ApprovalDecided("workflow", "approve", approvals=1, required=2)) == ()
    assert after_approval(ApprovalDecided("tool", "approve", approvals=1, required=2)) == ()


def test_a_rejected_or_lapsed_workflow_ends_blocked_with_the_reason():
    for decision in ("reject", "lapse"):
        assert after_approval(ApprovalDecided("workflow", decision, reason="not today")) == (
            EndRun("blocked", "not today"),
        )


def test_an_approved_call_runs_and_a_refused_one_gets_the_reason_as_its_result():
    assert after_approval(ApprovalDecided("tool", "approve", approvals=2, required=2)) == (RunApprovedCall(),)
    assert after_approval(ApprovalDecided("tool", "reject", reason="too wide")) == (RefuseCall("too wide"),)


def test_a_run_deadline_fails_the_run_and_a_step_deadline_fails_the_step():
    assert after_deadline(DeadlinePassed("run", "timeout of 60s passed")) == (
        EndRun("failed", "timeout of 60s passed"),
    )
    assert after_deadline(DeadlinePassed("step", "stepTimeout of 5s passed", "fetch")) == (
        FailStep("fetch", "stepTimeout of 5s passed"),
    )


@given(
    kind=st.sampled_from(["workflow", "tool"]),
    decision=st.sampled_from(["approve", "reject", "lapse"]),
    approvals=st.integers(0, 3),
    required=st.integers(1, 2),
)
def test_nothing_with_effects_follows_without_enough_approvals(kind, decision, approvals, required):
    decisions = after_approval(ApprovalDecided(kind, decision, "why", approvals, required))
    runs_something = any(isinstance(d, (StartRun, RunApprovedCall)) for d in decisions)
    assert runs_something == (decision == "approve" and approvals >= required)
    # Every decision is final or nothing: a refusal never also runs.
    assert len(decisions) <= 1
