"""Run controls besides cancel: resume a running run whose work was lost."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRefresh

from runs import actions
from runs.actions.recovery import do_resume_run
from runs.models import Run
from runs.views.htmx_requests import HtmxHttpRequest


@require_POST
def run_resume(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    try:
        run = actions.access_run(request.user, run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None
    refusal = actions.control_refusal(request.user, run, "resume")
    if refusal:
        messages.error(request, refusal)
    elif run.status == Run.Status.RUNNING:
        nudged = do_resume_run(run.pk, f"resumed by {request.user.get_username()}")
        messages.success(request, f"resumed: {', '.join(nudged) or 'the coordinator'} asked to go on")
    else:
        messages.error(request, f"run {run.pk} is {run.status}: only a running run can be resumed")
    if request.htmx:
        # The page's form posts with htmx (a live-updated header has no CSRF
        # token of its own); a reload shows the message.
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run.pk)
