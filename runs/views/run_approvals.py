"""A run page's approvals, decided in place: what waits (what it will run,
who asked, since when) with Approve and Reject for whoever may decide it,
and how the decided ones were decided (who, when, why). Drawn for the person
who looks: live updates only say that it changed, and the page fetches it
again (runs/static/js/live.js)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from runs.actions.approvals import ApprovalError, decision_refusal, do_decide
from runs.actions.questions import answer_refusal
from runs.models import Approval, Run
from runs.views.access import run_for_user
from runs.views.htmx_requests import HtmxHttpRequest

# Decided approvals shown under the pending ones, newest first.
DECIDED_SHOWN = 5


@dataclass(frozen=True)
class Waiting:
    """A pending approval and why the person looking may not decide it ("" if they may)."""

    approval: Approval
    refusal: str


def approvals_context(run: Run, user, *, refusal: str = "") -> dict:
    """The run's pending approvals, each with ``refusal`` (why ``user`` may
    not decide it, "" if they may), and its latest decided ones."""
    # One query for a run that asked for none (most runs), whose page loads this too.
    approvals = list(run.approvals.select_related("requested_by").prefetch_related("decisions__user").order_by("pk"))
    pending = [
        Waiting(approval, refusal_for(user, approval))
        for approval in approvals
        if approval.status == Approval.Status.PENDING
    ]
    decided = sorted(
        (approval for approval in approvals if approval.status != Approval.Status.PENDING),
        key=lambda approval: (approval.decided_at is not None, approval.decided_at, approval.pk),
        reverse=True,
    )[:DECIDED_SHOWN]
    return {"run": run, "pending_approvals": pending, "decided_approvals": decided, "decide_error": refusal}


def refusal_for(user, approval: Approval) -> str:
    """Why ``user`` may not decide ``approval`` (or, a question, answer it); "" if they may."""
    if approval.kind == Approval.Kind.QUESTION:
        return answer_refusal(user, approval)
    return decision_refusal(user, approval)


@require_safe
def run_approvals(request: HttpRequest, run_id: int) -> HttpResponse:
    """The approvals card of run ``run_id``, for the person asking."""
    run = run_for_user(request, run_id)
    return render(request, "runs/partials/run_approvals.html", approvals_context(run, request.user))


@require_POST
def run_approval_decide(request: HtmxHttpRequest, run_id: int, approval_id: int) -> HttpResponse:
    """Approve or reject one of the run's approvals through ``do_decide`` (its
    rules and their refusals). The page's form posts with htmx and gets the
    card back, the decision in it, or the refusal; without htmx, the page."""
    run = run_for_user(request, run_id)
    error = ""
    if not run.approvals.filter(pk=approval_id).exists():
        error = f"approval {approval_id}: not one of run {run.pk}'s approvals"
    else:
        try:
            do_decide(
                approval_id,
                request.user,
                request.POST.get("decision", ""),
                request.POST.get("reason", ""),
                request.POST.get("arguments_hash") or None,
            )
        except ApprovalError as exc:
            error = f"approval {approval_id}: {exc}"
    if request.htmx:
        context = approvals_context(run, request.user, refusal=error)
        return render(request, "runs/partials/run_approvals.html", context)
    if error:
        messages.error(request, error)
    return redirect("runs:detail", run_id=run.pk)
