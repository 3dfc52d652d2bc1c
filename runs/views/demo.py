"""The runs page's "Watch a demo" button (runs/demo)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs import actions
from runs.demo import do_start_demo
from runs.views.htmx_requests import HtmxHttpRequest
from runs.views.runs import too_many_runs


@require_POST
def run_demo(request: HtmxHttpRequest) -> HttpResponse:
    """Start a paced demo run and open its page, where it moves for about
    half a minute."""
    try:
        run = do_start_demo(request.user)
    except actions.TooManyRuns as exc:
        return too_many_runs(request, exc)
    return redirect("runs:detail", run_id=run.pk)
