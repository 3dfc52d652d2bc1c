"""A step's time limit and the retries of its model calls
(agents/core/attempts.py), without Django: examples, and
properties over random limits (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core.attempts import StepLimit, model_call_retries, overdue, step_limit

limits = st.none() | st.floats(0.001, 1e6)
retries = st.none() | st.integers(0, 20)


def test_a_step_s_own_timeout_wins_over_the_workflow_s_and_is_named_when_passed():
    limit = step_limit(2, 60)

    assert limit == StepLimit(2, "timeout")
    assert overdue("deploy", 2.04, limit) == "step deploy ran 2.0s, past timeout (2s)"
    assert overdue("deploy", 1.9, limit) is None


def test_time_spent_waiting_for_a_person_s_answers_does_not_count():
    limit = StepLimit(1, "timeout")

    assert overdue("s", 5, limit, waited=4.5) is None
    assert (
        overdue("s", 5, limit, waited=3) == "step s ran 2.0s (not counting 3.0s waiting for answers), past timeout (1s)"
    )


def test_without_its_own_a_step_has_the_workflow_s_limit_or_none():
    assert overdue("s1", 5, step_limit(None, 1)) == "step s1 ran 5.0s, past options.stepTimeout (1s)"
    assert step_limit(None, None) is None
    assert overdue("s1", 1e9, None) is None


@given(own=limits, default=limits, ran=st.floats(0, 2e6), share=st.floats(0, 1))
def test_a_step_is_overdue_exactly_once_its_nearest_own_limit_has_run_out(own, default, ran, share):
    limit = step_limit(own, default)
    waited = ran * share  # spent waiting for a person's answers
    said = overdue("s", ran, limit, waited)

    expected = own if own is not None else default
    if expected is None:
        assert limit is None and said is None
        return
    assert limit is not None and limit.seconds == expected
    assert limit.field == ("timeout" if own is not None else "options.stepTimeout")
    assert (said is not None) == (ran - waited >= expected)
    if said is not None:
        assert said.startswith("step s ran ") and f"past {limit.field} ({expected:g}s)" in said


def test_a_step_s_max_retries_wins_over_the_workflow_s():
    assert model_call_retries(0, 3) == 0
    assert model_call_retries(None, 3) == 3
    assert model_call_retries(None, None) is None


@given(own=retries, default=retries)
def test_the_retries_of_a_model_call_are_the_nearest_set(own, default):
    got = model_call_retries(own, default)

    assert got == (own if own is not None else default)
    assert got is None or got >= 0
