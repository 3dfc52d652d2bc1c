"""The approvals queue: pending requests, live, decided by people with the
approve permission, each with a reason."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from runs.actions.approvals import PERMISSION, ApprovalError, do_decide, do_lapse_expired
from runs.models import Approval
from runs.views.htmx_requests import HtmxHttpRequest
from runs.views.run_approvals import refusal_for


@require_safe
def approval_list(request: HtmxHttpRequest) -> HttpResponse:
    """Pending approvals first, then the latest decided ones. htmx polls the
    list (the partial) so new requests appear without a reload."""
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied("the approvals queue needs the approve permission")
    do_lapse_expired()
    approvals = Approval.objects.select_related("run__workflow", "requested_by", "tool_call").prefetch_related(
        "decisions__user"
    )
    context = {
        # Each with why this person may not decide it ("" if they may): the form is only for those who may.
        "pending": [
            (approval, refusal_for(request.user, approval))
            for approval in approvals.filter(status=Approval.Status.PENDING).order_by("created")
        ],
        "decided": list(approvals.exclude(status=Approval.Status.PENDING).order_by("-decided_at")[:50]),
        "self_approval": settings.ZENWEB_ALLOW_SELF_APPROVAL,
    }
    template = "runs/partials/approval_queue.html" if request.htmx else "runs/approvals.html"
    return render(request, template, context)


@require_POST
def approval_decide(request: HttpRequest, approval_id: int) -> HttpResponse:
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied("deciding approvals needs the approve permission")
    try:
        approval = do_decide(
            approval_id,
            request.user,
            request.POST.get("decision", ""),
            request.POST.get("reason", ""),
            request.POST.get("arguments_hash") or None,
        )
    except (ApprovalError, Approval.DoesNotExist) as exc:
        messages.error(request, f"approval {approval_id}: {exc}")
    else:
        messages.success(request, f"approval {approval.pk}: {approval.status}")
    return redirect("runs:approvals")
