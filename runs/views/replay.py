"""A run replayed from its event log: a scrubber over seq, the routing
graph and the step states at the chosen event."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from runs.replay import replay_context
from runs.views.access import run_for_user
from runs.views.htmx_requests import HtmxHttpRequest


@require_safe
def run_replay(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """GET /runs/<id>/replay/?seq=N (default: the last event). htmx gets
    only the graph card; a history restore gets the whole page."""
    run = run_for_user(request, run_id)
    value = request.GET.get("seq", "")
    context = replay_context(run, int(value) if value.isdigit() else None)
    if request.htmx and not request.htmx.history_restore_request:
        response = render(request, "runs/partials/routing_graph.html", context)
    else:
        response = render(request, "runs/replay.html", context)
    # The same URL answers with a fragment or a page: caches must tell them apart.
    patch_vary_headers(response, ["HX-Request"])
    return response
