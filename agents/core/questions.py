"""The rule of a question a step asked a person (the ``ask_person`` tool):
its call waits, and its step with it, until the question closes.

- ``QuestionClosed`` answered: an answer that is empty, longer than the
  cap, or not one of the offered options (when there are options) is
  refused with the reason (``RefuseAnswer``) and the question stays open;
  any other closes it, and the call's result is the answer, said by whom
  (``AnswerCall``), after which the step takes its next turn.
- ``QuestionClosed`` lapsed (its wait timed out, or its step or run ended):
  the call's result says that no answer came, and why.

``waited_seconds`` is the other half of the rule: the time a step spent
waiting for answers does not count against its own timeout or the run's
wall-time budget. ``decide`` (agents/core/machine.py) calls
``after_question``; runs/actions/questions.py applies it."""

from __future__ import annotations

from collections.abc import Iterable

from agents.core.decisions import AnswerCall, RefuseAnswer
from agents.core.happenings import QuestionClosed

__all__ = ["AnswerCall", "QuestionClosed", "RefuseAnswer", "after_question", "waited_seconds"]


def after_question(closed: QuestionClosed) -> tuple[AnswerCall | RefuseAnswer]:
    """The call's result, or why the answer is refused (see the module's docstring)."""
    if closed.how == "lapsed":
        return (AnswerCall(answered=False, reason=closed.reason or "no answer came"),)
    answer = closed.answer.strip()
    if not answer:
        return (RefuseAnswer("an answer is required"),)
    if len(answer) > closed.max_chars:
        return (RefuseAnswer(f"an answer has at most {closed.max_chars:,} characters; this one has {len(answer):,}"),)
    if closed.options and answer not in closed.options:
        return (RefuseAnswer(f"the answer must be one of the options: {', '.join(closed.options)}"),)
    return (AnswerCall(answered=True, answer=answer, by=closed.by),)


def waited_seconds(start: float, now: float, waits: Iterable[tuple[float, float | None]]) -> float:
    """How much of the time from ``start`` to ``now`` was spent waiting:
    the union of ``waits`` (each from its start to its end, or to ``now``
    while it waits), within that span. Two questions asked in one turn wait
    at once: the time they overlap counts once."""
    spans = sorted((max(begin, start), min(end if end is not None else now, now)) for begin, end in waits)
    total, reached = 0.0, start
    for begin, end in spans:
        begin = max(begin, reached)
        if end > begin:
            total += end - begin
            reached = end
    return total
