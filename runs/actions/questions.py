"""Questions a step asks a person (the ``ask_person`` tool): asked, answered,
lapsed.

A question is an Approval of kind ``question`` linked to the waiting call,
so it is listed, shown and lapsed with the approvals: the run page and the
approvals queue show it with a field or its options, the API lists and
answers it. Who may answer: the person who started the run, or anyone with
the approve permission (``answer_refusal``). What the answer becomes (the
call's result, or a refusal) is the state machine's rule
(agents/core/questions.py); ``settle_question`` applies it and the step
takes its next turn. A question lapses after ZENWEB_ASK_PERSON_TIMEOUT, or
when its step or run ends (ending.py's ``close_approval``): the result
then says that no answer came.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.core import machine, questions
from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.events.tool_events import ApprovalLapsed, InputReceived, ToolResult, WaitingForInput
from agents.tools.builtin.ask import MAX_ANSWER_CHARS, AskPersonResult
from runs.actions.approval_requests import arguments_hash
from runs.actions.notifications import queue_question_notice
from runs.actions.pending import deliver_result
from runs.models import Approval, Run, ToolCall
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork

PERMISSION = "runs.decide_approval"


class QuestionError(Exception):
    """An answer that cannot be taken; the message says why."""


def request_question(run: Run, step_id: str, tool_call_id: str, question: str, options: list[str], sink: EventSink):
    """A pending question for call ``tool_call_id`` of step ``step_id`` (its
    row links to it when the turn is recorded), said in the run's events
    (``waiting_for_input``) through ``sink``, the turn's. Call inside the
    transaction that records the turn."""
    arguments = {"question": question, "options": options}
    expires_at = timezone.now() + timedelta(seconds=settings.ZENWEB_ASK_PERSON_TIMEOUT)
    approval = store().create_approval(
        {
            "run": run,
            "kind": Approval.Kind.QUESTION,
            "step_id": step_id,
            "what": f"a question from step {step_id}",
            "why": question,
            "arguments": arguments,
            "arguments_hash": arguments_hash({"question": arguments, "tool_call_id": tool_call_id}),
            "requested_by": run.created_by,
            "expires_at": expires_at,
        }
    )
    waiting = WaitingForInput(
        approval_id=approval.pk,
        tool_call_id=tool_call_id,
        question=question,
        options=options,
        expires_at=expires_at.isoformat(),
    )
    sink.emit(RuntimeEvent.of(waiting, step_id))
    queue_question_notice(approval)
    return approval


def answer_refusal(user, approval: Approval) -> str:
    """Why ``user`` may not answer ``approval`` now; "" if they may. The
    person who started the run may, and so may anyone with the approve
    permission (who also sees the runs that ask them something)."""
    if approval.kind != Approval.Kind.QUESTION:
        return f"approval {approval.pk} is not a question: it is approved or rejected"
    if approval.status != Approval.Status.PENDING:
        return f"question {approval.pk} is already {approval.status}"
    if not may_answer(user, approval):
        return NOT_YOURS
    return ""


NOT_YOURS = "only the person who started the run, or someone with the approve permission, may answer it"


def may_answer(user, approval: Approval) -> bool:
    """Whether ``user`` is one who may answer ``approval``'s questions."""
    starter = approval.run.created_by_id
    return user.is_authenticated and ((starter is not None and starter == user.pk) or user.has_perm(PERMISSION))


def do_answer(approval_id: int, user, answer: str) -> Approval:
    """Take ``user``'s answer to question ``approval_id``: the waiting call
    gets it as its result and its step goes on. Raise QuestionError saying
    why not (Approval.DoesNotExist for no such approval)."""
    run_id = Approval.objects.values_list("run_id", flat=True).get(pk=approval_id)
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.lock_run()
        # Only the approval's row: PostgreSQL locks no nullable side of an outer join (the tool call).
        locked = Approval.objects.select_for_update(of=("self",))
        approval = locked.select_related("run", "tool_call").get(pk=approval_id)
        if approval.status == Approval.Status.PENDING and _expired(approval):
            # Lapsed in the refusal's stead: the step goes on without an answer.
            settle_question(approval, _lapse(approval), uow)
            raise QuestionError(f"question {approval.pk} lapsed: no answer came in time")
        refusal = answer_refusal(user, approval)
        if refusal:
            raise QuestionError(refusal)
        closed = questions.QuestionClosed(
            "answered",
            answer=answer or "",
            by=user.get_username(),
            options=tuple(approval.arguments.get("options") or ()),
            max_chars=MAX_ANSWER_CHARS,
        )
        (decision,) = machine.decide(machine.UNREAD, closed)
        if isinstance(decision, questions.RefuseAnswer):
            raise QuestionError(decision.reason)
        assert isinstance(decision, questions.AnswerCall)
        store().add_approval_decision(
            {
                "approval": approval,
                "user": user,
                "decision": "answer",
                "reason": decision.answer,
                "arguments_hash": approval.arguments_hash,
            }
        )
        settle_question(approval, decision, uow)
    return approval


def lapse_question(approval: Approval, reason: str, uow: UnitOfWork) -> None:
    """Close a pending question with no answer (its wait timed out, its
    step or run ended): the call's result says so. With the run's lock held."""
    closed = questions.QuestionClosed("lapsed", reason=reason)
    for decision in machine.decide(machine.UNREAD, closed):
        if isinstance(decision, questions.AnswerCall):
            settle_question(approval, decision, uow)


def do_lapse_expired_questions() -> int:
    """Lapse the pending questions past their wait (the sweeper's); how many."""
    expired = Approval.objects.filter(
        kind=Approval.Kind.QUESTION, status=Approval.Status.PENDING, expires_at__lte=timezone.now()
    )
    lapsed = 0
    for pk, run_id in list(expired.values_list("pk", "run_id")):
        with transaction.atomic(), UnitOfWork(run_id) as uow:
            uow.lock_run()
            approval = Approval.objects.select_for_update(of=("self",)).select_related("tool_call").get(pk=pk)
            if approval.status == Approval.Status.PENDING and _expired(approval):
                settle_question(approval, _lapse(approval), uow)
                lapsed += 1
    return lapsed


def settle_question(approval: Approval, decision: questions.AnswerCall, uow: UnitOfWork) -> None:
    """Record how the question closed and give its call the result the
    state machine decided (``decision``); the step takes its next turn once
    none of its calls waits. Its events go through ``uow``."""
    status = Approval.Status.ANSWERED if decision.answered else Approval.Status.LAPSED
    store().settle_approval(approval, status, "" if decision.answered else decision.reason)
    call = approval.tool_call
    if not decision.answered:
        lapsed = ApprovalLapsed(approval_id=approval.pk, reason=decision.reason)
        uow.sink.emit(RuntimeEvent.of(lapsed, approval.step_id))
    elif call is not None:
        received = InputReceived(
            approval_id=approval.pk, tool_call_id=call.tool_call_id, by=decision.by, answer=decision.answer
        )
        uow.sink.emit(RuntimeEvent.of(received, approval.step_id))
    if call is None:
        return
    result = AskPersonResult(
        answered=decision.answered,
        answer=decision.answer if decision.answered else None,
        answered_by=decision.by if decision.answered else None,
        reason=None if decision.answered else decision.reason,
    )
    waited = int((timezone.now() - approval.created).total_seconds() * 1000)  # how long the person took
    delivered = deliver_result(
        call,
        result.model_dump_json(exclude_none=True),
        status=ToolCall.Status.DONE,
        event=ToolResult,
        event_data={"approval_id": approval.pk, "status": status, "ok": True, "name": call.name, "duration_ms": waited},
    )
    if delivered is not None:
        uow.sink.emit(delivered)


def _lapse(approval: Approval) -> questions.AnswerCall:
    closed = questions.QuestionClosed("lapsed", reason=_lapse_reason(approval))
    (decision,) = machine.decide(machine.UNREAD, closed)
    assert isinstance(decision, questions.AnswerCall)
    return decision


def _lapse_reason(approval: Approval) -> str:
    waited = settings.ZENWEB_ASK_PERSON_TIMEOUT
    return f"no answer came within {waited:g}s (ZENWEB_ASK_PERSON_TIMEOUT): decide without it"


def _expired(approval: Approval) -> bool:
    return approval.expires_at is not None and approval.expires_at <= timezone.now()
