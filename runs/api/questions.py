"""Questions steps ask people (ask_person) over the API: the ones the caller
may see, and an answer. A question is seen by whoever sees its run (its
starter, staff, approvers) and answered by its run's starter or anyone with
the approve permission (runs/actions/questions.py); a run the caller may not
see is a 404, as on the run's own URL."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from django.http import HttpRequest
from ninja import Query, Router
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agents.hidden_characters import escape_hidden, hidden_in
from agents.tools.builtin.ask import MAX_ANSWER_CHARS
from runs.actions import visible_runs
from runs.actions.questions import NOT_YOURS, QuestionError, answer_refusal, do_answer, may_answer
from runs.api import bodies
from runs.api import schemas as s
from runs.api.errors import ApiError
from runs.models import Approval

router = Router(by_alias=True)

QuestionStatus = Literal["pending", "answered", "lapsed"]


class QuestionListQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: QuestionStatus = "pending"
    run: int | None = Field(default=None, ge=1, le=s.MAX_ID, description="Only the questions of this run.")
    limit: Annotated[int, Field(ge=1, le=s.MAX_PAGE)] = s.DEFAULT_PAGE
    before: int | None = Field(
        default=None, ge=1, le=s.MAX_ID, description="Only questions with a larger id (the next page)."
    )


class AnswerRequest(BaseModel):
    """The answer: one of the question's options when it offers some."""

    model_config = ConfigDict(extra="forbid")

    answer: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ANSWER_CHARS)]


class QuestionEscaped(BaseModel):
    question: str
    options: list[str]


class QuestionOut(BaseModel):
    id: int
    run: int
    workflow: str
    step_id: str
    tool_call_id: str | None = Field(description="The waiting ask_person call (null until its turn is recorded).")
    status: QuestionStatus
    question: str
    options: list[str] = Field(description="The answers to choose from; empty: any text.")
    asked_at: datetime
    expires_at: datetime | None = Field(description="When the wait times out (ZENWEB_ASK_PERSON_TIMEOUT).")
    answer: str | None
    answered_by: str | None
    answered_at: datetime | None
    reason: str = Field(description="Why no answer came, for a lapsed question.")
    may_answer: bool = Field(description="Whether the caller may answer it now.")
    hidden_characters: bool = Field(description=s.HIDDEN_CHARACTERS)
    escaped: QuestionEscaped = Field(description="The question and options with hidden characters escaped.")


class QuestionList(BaseModel):
    questions: list[QuestionOut]
    next: str | None = Field(description="The next page, if there is one.")


def _questions(request: HttpRequest):
    return (
        Approval.objects.filter(kind=Approval.Kind.QUESTION, run__in=visible_runs(request.user))
        .select_related("run__workflow", "run__created_by", "tool_call")
        .prefetch_related("decisions__user")
        .order_by("pk")
    )


def _out(request: HttpRequest, approval: Approval) -> QuestionOut:
    question, options = approval.why, list(approval.arguments.get("options") or [])
    answered = next((d for d in approval.decisions.all() if d.decision == "answer"), None)
    return QuestionOut(
        id=approval.pk,
        run=approval.run_id,
        workflow=approval.run.workflow.name,
        step_id=approval.step_id,
        tool_call_id=approval.tool_call.tool_call_id if approval.tool_call else None,
        status=approval.status,
        question=question,
        options=options,
        asked_at=approval.created,
        expires_at=approval.expires_at,
        answer=answered.reason if answered else None,
        answered_by=answered.user.get_username() if answered else None,
        answered_at=answered.created if answered else None,
        reason=approval.reason,
        may_answer=not answer_refusal(request.user, approval),
        hidden_characters=hidden_in([question, options]),
        escaped=QuestionEscaped(question=escape_hidden(question), options=[escape_hidden(o) for o in options]),
    )


@router.get(
    "/questions",
    url_name="question-list",
    summary="Questions steps ask people, by status",
    response={200: QuestionList, 400: s.InvalidRequest | s.Error, 401: s.Error},
)
def question_list(request: HttpRequest, query: Query[QuestionListQuery]) -> QuestionList:
    """The questions of the runs the caller may see (pending by default),
    oldest first, a page at a time (`before`: the last id seen)."""
    questions = _questions(request).filter(status=query.status)
    if query.run is not None:
        questions = questions.filter(run_id=query.run)
    if query.before is not None:
        questions = questions.filter(pk__gt=query.before)
    page, next_url = bodies.page(request, questions, query.limit)
    return QuestionList(questions=[_out(request, q) for q in page], next=next_url)


@router.post(
    "/questions/{int:question_id}/answer",
    url_name="question-answer",
    summary="Answer a question a step asks (its run's starter or an approver)",
    response={200: QuestionOut, 400: s.InvalidRequest | s.Error, (401, 403, 404, 409, 413): s.Error},
)
def question_answer(request: HttpRequest, question_id: int, payload: AnswerRequest) -> QuestionOut:
    """Answer: 200 with the question, answered; the step goes on with the
    answer as its call's result. 409 if it is answered or lapsed already,
    or the answer is not one of its options; 403 if the caller sees the run
    but may not answer (neither its starter nor an approver)."""
    question = _questions(request).filter(pk=question_id).first()
    if question is None:
        raise ApiError(404, f"question {question_id} not found")
    if not may_answer(request.user, question):
        raise ApiError(403, NOT_YOURS)
    try:
        do_answer(question_id, request.user, payload.answer)
    except QuestionError as exc:
        raise ApiError(409, str(exc)) from None
    return _out(request, _questions(request).get(pk=question_id))
