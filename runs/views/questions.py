"""Answering a question a step asks (ask_person) from the dashboard: on the
run page (its approvals card, with htmx) and in the approvals queue. The
rules and their refusals are ``do_answer``'s (runs/actions/questions.py)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from runs.actions.questions import QuestionError, do_answer
from runs.models import Approval
from runs.views.access import run_for_user
from runs.views.htmx_requests import HtmxHttpRequest
from runs.views.run_approvals import approvals_context


def _answer(request: HttpRequest, approval_id: int) -> str:
    """Take the posted answer; "" or why it was refused."""
    try:
        do_answer(approval_id, request.user, request.POST.get("answer", ""))
    except QuestionError as exc:
        return f"question {approval_id}: {exc}"
    return ""


@require_POST
def run_question_answer(request: HtmxHttpRequest, run_id: int, approval_id: int) -> HttpResponse:
    """Answer one of the run's questions; with htmx the approvals card comes
    back (the answer in it, or the refusal), else the run page."""
    run = run_for_user(request, run_id)
    if not run.approvals.filter(pk=approval_id, kind=Approval.Kind.QUESTION).exists():
        error = f"question {approval_id}: not one of run {run.pk}'s questions"
    else:
        error = _answer(request, approval_id)
    if request.htmx:
        context = approvals_context(run, request.user, refusal=error)
        return render(request, "runs/partials/run_approvals.html", context)
    if error:
        messages.error(request, error)
    return redirect("runs:detail", run_id=run.pk)


@require_POST
def question_answer(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Answer a question from the approvals queue, back to the queue."""
    question = Approval.objects.filter(pk=approval_id, kind=Approval.Kind.QUESTION).values("run_id").first()
    if question is None:
        messages.error(request, f"question {approval_id}: no such question")
        return redirect("runs:approvals")
    run_for_user(request, question["run_id"])  # a 404 for a run the person may not see
    error = _answer(request, approval_id)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"question {approval_id}: answered")
    return redirect("runs:approvals")
