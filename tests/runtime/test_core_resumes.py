"""A forward to a step that ended, through ``decide``
(agents/core/resumes.py): resumed, or dropped with the first reason that
holds; without Django."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import DropMessage, ResumeStep
from agents.core.happenings import ForwardToEnded

STATUSES = ("completed", "failed", "skipped", "cancelled")


@given(
    status=st.sampled_from(STATUSES),
    going_on=st.booleans(),
    size=st.integers(0, 200),
    resumes=st.integers(0, 5),
    max_resumes=st.integers(0, 5),
    resuming=st.booleans(),
)
def test_a_forward_resumes_only_a_completed_step_of_a_run_that_goes_on_within_its_caps(
    status, going_on, size, resumes, max_resumes, resuming
):
    forward = ForwardToEnded("s", status, going_on, size, 100, resumes, max_resumes, resuming)

    (decision,) = machine.decide(machine.UNREAD, forward)

    reasons = [
        ("target_terminal", status != "completed"),
        ("resume_shutdown", not going_on),
        ("no_transcript", size == 0),
        ("transcript_too_large", size > 100),
        ("max_wake_cycles", resumes >= max_resumes),
    ]
    first = next((reason for reason, holds in reasons if holds), None)
    if first is not None:
        assert decision == DropMessage(first)
    elif resuming:
        assert decision == ResumeStep(resumes, starts=False)
    else:
        assert decision == ResumeStep(resumes + 1, starts=True)


@given(st.integers(0, 6), st.lists(st.booleans(), max_size=20))
def test_a_step_is_never_resumed_more_than_its_cap(cap, ends_between):
    """Forwards keep coming; after some of them the resume under way ends."""
    resumes, resuming = 0, False
    for ended in ends_between:
        forward = ForwardToEnded("s", "completed", True, 10, 100, resumes, cap, resuming)
        (decision,) = machine.decide(machine.UNREAD, forward)
        if isinstance(decision, ResumeStep):
            resumes, resuming = decision.resume, True
        if ended:
            resuming = False
    assert resumes <= cap
