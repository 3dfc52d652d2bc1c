"""Dashboard pages. Small functions: fetch with an access check, render."""

from __future__ import annotations

import json
from datetime import datetime, time, timedelta
from typing import get_args

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import HttpResponseClientRefresh

from agents.spec import Mode
from runs import actions, live
from runs.actions.costs import CALLS_ON_PAGE, model_calls
from runs.actions.tooling import catalog_registry, mcp_server_statuses
from runs.graph import graph_context
from runs.models import Approval, CreatedTool, Run, Step, Workflow
from runs.views.access import run_for_user
from runs.views.events import EventFilter, event_filter_context, newest_page
from runs.views.forks import fork_context
from runs.views.htmx_requests import HtmxHttpRequest
from runs.views.run_approvals import approvals_context
from runs.views.start_form import start_choices, unconfirmed_destructive

# The newest events render with the page; older ones load on demand.
EVENTS_ON_PAGE = 200


RUNS_ON_PAGE = 50
RUN_FILTERS = ("status", "workflow", "user", "from", "to", "q")


def _day_start(value: str, *, days: int = 0) -> datetime | None:
    """The aware start of the day ``value`` (YYYY-MM-DD) names, plus ``days``;
    None when it names no day, or one past 9999-12-31 (``to=9999-12-31`` ends
    no earlier than no ``to`` at all). A range on ``created`` keeps its index
    usable, where ``created__date`` would not."""
    try:
        day = parse_date(value)
        if day is None:
            return None
        return timezone.make_aware(datetime.combine(day + timedelta(days=days), time.min))
    except (ValueError, OverflowError):
        return None


# Not a status of its own: runs under way that the sweeper marked stuck
# (a start never taken, no progress), for whoever watches over the workers.
STUCK = "stuck"


def _filter_runs(runs: QuerySet[Run], filters: dict[str, str], *, staff: bool) -> QuerySet[Run]:
    if filters["status"] == STUCK:
        runs = runs.filter(Run.STUCK)
    elif filters["status"]:
        runs = runs.filter(status=filters["status"])
    if filters["workflow"]:
        runs = runs.filter(workflow__name=filters["workflow"])
    # Others see only their own runs anyway: the choice is staff's.
    if staff and filters["user"]:
        runs = runs.filter(created_by__username=filters["user"])
    if since := _day_start(filters["from"]):
        runs = runs.filter(created__gte=since)
    if until := _day_start(filters["to"], days=1):
        runs = runs.filter(created__lt=until)
    if query := filters["q"]:
        match = Q(command__icontains=query) | Q(result__icontains=query) | Q(error__icontains=query)
        number = query.removeprefix("#")
        if number.isdigit():
            match |= Q(pk=int(number))
        runs = runs.filter(match)
    return runs


def _with_progress(runs: list[Run]) -> list[Run]:
    """Set steps_total and steps_ended (how many ended with each status) on
    each run, as the run header has them, in one query for the page
    (annotating the paginated queryset would make its COUNT group by run)."""
    counts = (
        Step.objects.filter(run__in=[run.pk for run in runs], kind=Step.Kind.STEP)
        .values("run", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    by_run: dict[int, dict[str, int]] = {}
    for row in counts:
        by_run.setdefault(row["run"], {})[row["status"]] = row["n"]
    for run in runs:
        by_status = by_run.get(run.pk, {})
        run.steps_total = sum(by_status.values())
        run.steps_ended = [(status, n) for status in Step.TERMINAL if (n := by_status.get(status, 0))]
    return runs


@require_safe
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    """Runs, filtered from the querystring. htmx polls the same URL for the
    table body, so statuses move without a reload."""
    return _list_page(request)


def too_many_runs(request: HtmxHttpRequest, refusal: actions.TooManyRuns) -> HttpResponse:
    """A start refused for the person's runs under way: the runs page with
    the refusal, as a 429 with Retry-After (as the API answers), so that a
    script posting the form sees it without reading the page."""
    response = _refused(request, str(refusal), 429)
    response["Retry-After"] = str(refusal.retry_after)
    return response


def _refused(request: HtmxHttpRequest, message: str, status: int) -> HttpResponse:
    messages.error(request, message)
    response = _list_page(request)
    response.status_code = status
    return response


def _list_page(request: HtmxHttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "").strip() for name in RUN_FILTERS}
    runs = _filter_runs(actions.visible_runs(request.user), filters, staff=request.user.is_staff)
    page = Paginator(runs.order_by("-created", "-pk"), RUNS_ON_PAGE).get_page(request.GET.get("page"))
    page.object_list = _with_progress(list(page.object_list))
    context = {"page": page, "filters": filters, "filtered": any(filters.values())}
    if request.htmx and request.method != "POST":  # a refused start's POST gets the whole page
        response = render(request, "runs/partials/run_rows.html", context)
    else:
        latest = actions.offered_workflows()
        users = get_user_model().objects.order_by("username").values_list("username", flat=True)
        context |= {
            # What a refused start sent, shown again once (run_start).
            "start_form": request.session.pop("start_form", None),
            "statuses": [*Run.Status.choices, (STUCK, "stuck (under way, no progress)")],
            "workflows": latest.values(),
            "start_choices": start_choices(latest.values()),
            "usernames": list(users) if request.user.is_staff else [],
        } | _first_screen(request.user)
        response = render(request, "runs/list.html", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _first_screen(user) -> dict:
    """What the runs page's "what to do next" card counts: the approvals
    waiting for a decision (for who may decide) and the person's own runs
    waiting for one."""
    pending = Approval.objects.filter(status=Approval.Status.PENDING)
    return {
        "approvals_waiting": pending.count() if user.has_perm("runs.decide_approval") else 0,
        "own_runs_waiting": Run.objects.filter(created_by=user, status=Run.Status.AWAITING_APPROVAL).count(),
    }


@require_safe
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = run_for_user(request, run_id)
    chosen = EventFilter.of(request.GET)
    if chosen:
        # The filters kept in the address (runs/static/js/live.js): the newest matching page.
        events, older_url = newest_page(run, chosen)
        hidden = 0  # not counted: the count would read every matching event
        last_seq = max(run.last_event_seq, events[-1].seq if events else 0)
    else:
        # Seqs are gapless, so the newest events are the last EVENTS_ON_PAGE
        # numbers: a range PostgreSQL reads from the (run, seq) index even when
        # its statistics still think the run is small (it sorted all 50,000
        # events of a freshly written run for a LIMIT otherwise).
        newest = run.events.filter(seq__gt=run.last_event_seq - EVENTS_ON_PAGE)
        events = list(newest.order_by("-seq")[:EVENTS_ON_PAGE])[::-1]
        last_seq = events[-1].seq if events else 0
        hidden = max(0, run.last_event_seq - len(events))
        older_url = f"{reverse('runs:events', args=[run.pk])}?before={events[0].seq}" if hidden and events else ""
    context = (
        live.run_context(run)
        | live.tool_calls_context(run)
        | live.governance_context(run)
        | approvals_context(run, request.user)
        | event_filter_context(run, chosen)
        | fork_context(run)
        | {
            "events": events,
            # The websocket's cursor: the run's last event, shown or filtered out.
            "last_seq": last_seq,
            "graph_seq": last_seq,
            "older_url": older_url,
            "hidden_events": hidden,
            # The header's Cancel and Resume, only for who may use them (live updates keep them as drawn here).
            "may_control": actions.may_control(request.user, run),
            "model_calls": model_calls(run, CALLS_ON_PAGE),
            "model_calls_limit": CALLS_ON_PAGE,
        }
    )
    return render(request, "runs/detail.html", context)


@require_POST
def run_start(request: HtmxHttpRequest) -> HttpResponse:
    """Start a run from the form. A refusal says what and where, and the
    form comes back as it was sent (``start_form`` in the session)."""
    chosen = request.POST.get("workflow", "")
    text = request.POST.get("inputs", "")
    mode = request.POST.get("mode", "chat")
    sent = {"workflow": int(chosen) if chosen.isdigit() else None, "inputs": text, "mode": mode}

    def refuse(message: str) -> HttpResponse:
        messages.error(request, message)
        if len(text) > KEPT_INPUT_CHARS:  # not kept in the session: the form asks again
            sent["inputs"] = ""
        request.session["start_form"] = sent
        return redirect("runs:list")

    if sent["workflow"] is None:  # the form's select sends a workflow's id
        return refuse(f"workflow: expected a workflow's id, got {chosen!r}")
    workflow = get_object_or_404(Workflow, pk=sent["workflow"])
    refusal = unconfirmed_destructive(workflow, request.POST)
    if refusal:
        return refuse(refusal)
    try:
        inputs = _inputs_of(text)
    except ValueError as exc:
        return refuse(str(exc))
    if mode not in get_args(Mode):
        return refuse(f"mode: expected {' or '.join(get_args(Mode))}, got {mode!r}")
    try:
        run = actions.do_create_run(workflow, inputs, user=request.user, mode=mode)
    except actions.TooManyRuns as exc:
        request.session["start_form"] = sent
        return too_many_runs(request, exc)
    except actions.NotOffered as exc:
        # A 409, as the API answers a request the resource's state refuses;
        # the message names the version that is current.
        return _refused(request, str(exc), 409)
    except actions.InputError as exc:
        return refuse(f"{workflow}: {exc}")
    return redirect("runs:detail", run_id=run.pk)


def _inputs_of(text: str) -> dict[str, str]:
    """The start form's inputs, a ``name=value`` a line (blank lines skipped);
    ValueError names the line that is not one, or that gives a name again."""
    inputs: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"inputs line {number}: expected name=value, got {line!r}")
        if name in lines:
            raise ValueError(f"inputs line {number}: {name} is given twice (first on line {lines[name]})")
        inputs[name], lines[name] = value.strip(), number
    return inputs


# Inputs this long are not kept for the form to show again after a refusal.
KEPT_INPUT_CHARS = 50_000


@require_POST
def run_cancel(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = run_for_user(request, run_id)
    refusal = actions.control_refusal(request.user, run, "cancel")
    if refusal:
        messages.error(request, refusal)
    else:
        actions.do_cancel_run(run.pk, f"cancelled by {request.user.get_username()}")
    if request.htmx:
        # The header's form posts with htmx and swaps nothing: a reload
        # shows the refusal (a cancel shows by itself, live).
        return HttpResponseClientRefresh() if refusal else HttpResponse(status=204)
    return redirect("runs:detail", run_id=run.pk)


@require_safe
def catalog(request: HttpRequest) -> HttpResponse:
    """The workflows people can start and the tools agents can call."""
    latest = actions.offered_workflows()
    toolsets: dict[str, list[dict]] = {}
    for entry in catalog_registry().catalog()["tools"]:
        entry["schema_json"] = json.dumps(entry["payload"]["schema"], indent=2, sort_keys=True)
        entry["result_json"] = json.dumps(entry["result"]["schema"], indent=2, sort_keys=True)
        toolsets.setdefault(f"{entry['service']}.{entry['toolset']}", []).append(entry)
    context = {
        "workflows": latest.values(),
        "toolsets": sorted(toolsets.items()),
        "mcp_servers": mcp_server_statuses(),
        # Who created what: create_tool's proposals, newest first (create_workflow's show in "workflows").
        "created_tools": CreatedTool.objects.select_related("created_by").order_by("-created")[:100],
    }
    return render(request, "runs/catalog.html", context)


@require_safe
def step_transcript(request: HttpRequest, run_id: int, step_pk: int) -> HttpResponse:
    """A step's conversation, loaded when someone opens it (htmx), since
    transcripts are too big to send with every live update."""
    run = run_for_user(request, run_id)
    step = get_object_or_404(Step, run=run, pk=step_pk)
    return render(request, "runs/partials/transcript.html", {"transcript": step.transcript})


@require_safe
def run_graph(request: HttpRequest, run_id: int) -> HttpResponse:
    """The routing graph card now: a big run's page fetches it when a live
    update marked it stale (see ZENWEB_LIVE_GRAPH_STEPS)."""
    run = run_for_user(request, run_id)
    # Read with the run, before the graph: the graph shows at least this much.
    seq = run.last_event_seq
    return render(request, "runs/partials/routing_graph.html", graph_context(run) | {"graph_seq": seq})
