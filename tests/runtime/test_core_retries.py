"""A step's retries in the state machine (agents/core/attempts.py through
machine.decide), without Django: examples, and a property over random
steps whose attempts fail, played to their end (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import FailStep, RetryStep
from agents.core.happenings import AttemptFailed
from agents.core.state import UNREAD


def test_a_failed_attempt_with_retries_left_runs_again():
    assert machine.decide(UNREAD, AttemptFailed("s", 0, 2, "boom")) == (RetryStep("s", 1, "boom"),)


def test_past_its_retries_the_step_fails_with_the_last_error():
    assert machine.decide(UNREAD, AttemptFailed("s", 2, 2, "again")) == (FailStep("s", "again"),)
    assert machine.decide(UNREAD, AttemptFailed("s", 0, 0, "boom")) == (FailStep("s", "boom"),)


@given(retries=st.integers(0, 10), succeeds_at=st.none() | st.integers(0, 12))
def test_a_step_runs_at_most_retries_plus_one_attempts(retries, succeeds_at):
    attempts, attempt = [], 0
    while True:
        attempts.append(attempt)
        if attempt == succeeds_at:
            outcome = "completed"
            break
        (decision,) = machine.decide(UNREAD, AttemptFailed("s", attempt, retries, f"failed {attempt}"))
        if isinstance(decision, FailStep):
            outcome = "failed"
            assert decision.error == f"failed {attempt}"
            break
        assert decision == RetryStep("s", attempt + 1, f"failed {attempt}")
        attempt = decision.attempt

    assert attempts == list(range(len(attempts)))
    assert len(attempts) <= retries + 1
    if succeeds_at is not None and succeeds_at <= retries:
        assert (outcome, len(attempts)) == ("completed", succeeds_at + 1)
    else:
        assert (outcome, len(attempts)) == ("failed", retries + 1)
