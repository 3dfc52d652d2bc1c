"""Dashboard pages. Small functions: fetch with an access check, render."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from runs import actions, live
from runs.actions.tooling import catalog_registry
from runs.models import Run, Step, Workflow

EVENTS_ON_PAGE = 1000


def _get_run_for_user(request: HttpRequest, run_id: int) -> Run:
    try:
        return actions.access_run(request.user, run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = (
        actions.visible_runs(request.user)
        .annotate(
            steps_total=Count("steps", filter=Q(steps__kind=Step.Kind.STEP)),
            steps_done=Count("steps", filter=Q(steps__kind=Step.Kind.STEP, steps__status__in=Step.TERMINAL)),
        )
        .order_by("-created", "-pk")
    )
    status = request.GET.get("status", "")
    if status:
        runs = runs.filter(status=status)
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    workflows = Workflow.objects.order_by("name", "-version").distinct()
    latest = {}
    for workflow in workflows:
        latest.setdefault(workflow.name, workflow)
    return render(
        request,
        "runs/list.html",
        {"page": page, "status": status, "statuses": Run.Status.choices, "workflows": latest.values()},
    )


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run_for_user(request, run_id)
    events = list(run.events.order_by("-seq")[:EVENTS_ON_PAGE])[::-1]
    context = (
        live.run_context(run)
        | live.tool_calls_context(run)
        | live.governance_context(run)
        | {
            "events": events,
            "last_seq": events[-1].seq if events else 0,
            "hidden_events": max(0, run.last_event_seq - len(events)),
        }
    )
    return render(request, "runs/detail.html", context)


@require_POST
def run_start(request: HttpRequest) -> HttpResponse:
    workflow = get_object_or_404(Workflow, pk=request.POST.get("workflow"))
    inputs = {}
    for number, line in enumerate(request.POST.get("inputs", "").splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep:
            messages.error(request, f"inputs line {number}: expected name=value, got {line!r}")
            return redirect("runs:list")
        inputs[name.strip()] = value.strip()
    try:
        run = actions.do_create_run(workflow, inputs, user=request.user)
    except actions.InputError as exc:
        messages.error(request, f"{workflow}: {exc}")
        return redirect("runs:list")
    return redirect("runs:detail", run_id=run.pk)


@require_POST
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run_for_user(request, run_id)
    actions.do_cancel_run(run.pk, f"cancelled by {request.user.get_username()}")
    return redirect("runs:detail", run_id=run.pk)


@require_GET
def catalog(request: HttpRequest) -> HttpResponse:
    """The workflows people can start and the tools agents can call."""
    latest: dict[str, Workflow] = {}
    for workflow in Workflow.objects.order_by("name", "-version"):
        latest.setdefault(workflow.name, workflow)
    toolsets: dict[str, list[dict]] = {}
    for entry in catalog_registry().catalog()["tools"]:
        entry["schema_json"] = json.dumps(entry["payload"]["schema"], indent=2, sort_keys=True)
        entry["result_json"] = json.dumps(entry["result"]["schema"], indent=2, sort_keys=True)
        toolsets.setdefault(f"{entry['service']}.{entry['toolset']}", []).append(entry)
    return render(request, "runs/catalog.html", {"workflows": latest.values(), "toolsets": sorted(toolsets.items())})


@require_GET
def step_transcript(request: HttpRequest, run_id: int, step_pk: int) -> HttpResponse:
    """A step's conversation, loaded when someone opens it (htmx), since
    transcripts are too big to send with every live update."""
    run = _get_run_for_user(request, run_id)
    step = get_object_or_404(Step, run=run, pk=step_pk)
    return render(request, "runs/partials/transcript.html", {"transcript": step.transcript})
