"""A question a step asked a person (agents/core/questions.py through
machine.decide), without Django: examples, and properties over random
answers, options and waits (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import AnswerCall, RefuseAnswer
from agents.core.happenings import QuestionClosed
from agents.core.questions import waited_seconds
from agents.core.state import UNREAD


def test_an_answer_is_the_calls_result_said_by_whom():
    closed = QuestionClosed("answered", answer="  blue ", by="alice", options=("red", "blue"))
    assert machine.decide(UNREAD, closed) == (AnswerCall(answered=True, answer="blue", by="alice"),)


def test_an_answer_outside_the_options_or_empty_or_too_long_is_refused():
    assert machine.decide(UNREAD, QuestionClosed("answered", answer="green", options=("red", "blue"))) == (
        RefuseAnswer("the answer must be one of the options: red, blue"),
    )
    assert machine.decide(UNREAD, QuestionClosed("answered", answer=" \n")) == (RefuseAnswer("an answer is required"),)
    assert machine.decide(UNREAD, QuestionClosed("answered", answer="x" * 11, max_chars=10)) == (
        RefuseAnswer("an answer has at most 10 characters; this one has 11"),
    )


def test_a_lapsed_question_says_no_answer_came_and_why():
    closed = QuestionClosed("lapsed", reason="no answer within 3600s (ZENWEB_ASK_PERSON_TIMEOUT)")
    assert machine.decide(UNREAD, closed) == (
        AnswerCall(answered=False, reason="no answer within 3600s (ZENWEB_ASK_PERSON_TIMEOUT)"),
    )
    assert machine.decide(UNREAD, QuestionClosed("lapsed")) == (AnswerCall(answered=False, reason="no answer came"),)


texts = st.text(st.characters(codec="utf-8"), max_size=30)


@given(answer=texts, options=st.lists(texts, max_size=4, unique=True), cap=st.integers(1, 20), lapsed=st.booleans())
def test_a_closed_question_gives_exactly_one_result_or_one_refusal(answer, options, cap, lapsed):
    closed = QuestionClosed(
        "lapsed" if lapsed else "answered", answer=answer, by="p", options=tuple(options), max_chars=cap
    )
    (decision,) = machine.decide(UNREAD, closed)

    stripped = answer.strip()
    acceptable = bool(stripped) and len(stripped) <= cap and (not options or stripped in options)
    if lapsed:
        # A lapse always ends the wait, whatever was offered: no answer is invented.
        assert decision == AnswerCall(answered=False, reason="no answer came")
    elif acceptable:
        assert decision == AnswerCall(answered=True, answer=stripped, by="p")
    else:
        assert isinstance(decision, RefuseAnswer) and decision.reason


spans = st.tuples(st.floats(0, 100), st.none() | st.floats(0, 100)).map(
    lambda span: span if span[1] is None else (min(span[0], span[1]), max(span[0], span[1]))
)


@given(start=st.floats(0, 50), length=st.floats(0, 60), waits=st.lists(spans, max_size=5))
def test_waiting_counts_once_and_never_more_than_the_time_that_passed(start, length, waits):
    now = start + length
    waited = waited_seconds(start, now, waits)

    assert 0 <= waited <= length + 1e-9
    # Measured on a grid: a moment counts if some wait covers it, however many do.
    grid = [start + length * (i + 0.5) / 400 for i in range(400)]
    covered = sum(any(b <= t < (e if e is not None else now) for b, e in waits) for t in grid)
    assert abs(waited - length * covered / 400) <= length * 2 * len(waits) / 400 + 1e-9


def test_two_questions_at_once_count_once():
    assert waited_seconds(0, 100, [(10, 30), (20, 40), (90, None)]) == 40
    assert waited_seconds(50, 100, [(10, 60)]) == 10
