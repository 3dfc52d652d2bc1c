"""Claims: what runs found, with their sources."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from runs.actions import visible_runs
from runs.models import Claim


@require_safe
def claim_list(request: HttpRequest) -> HttpResponse:
    claims = Claim.objects.filter(run__in=visible_runs(request.user)).select_related("run__workflow").order_by("-id")
    query = request.GET.get("q", "").strip()
    if query:
        claims = claims.filter(claim__icontains=query)
    page = Paginator(claims, 100).get_page(request.GET.get("page"))
    return render(request, "runs/claims.html", {"page": page, "q": query})
