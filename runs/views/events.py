"""A run's event stream, a page at a time: filterable by type and step,
paged by seq in either direction. Keyset paging on the (run, seq) unique
index keeps a page cheap however many events the run has; nothing counts
them all."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from agents.events import EVENT_TYPES
from runs.models import Event, Run
from runs.views.access import run_for_user

EVENTS_PER_PAGE = 200


def event_filter_context(run: Run, types: list[str] | None = None, step: str = "") -> dict:
    """What the event filter form needs (runs/partials/event_filters.html)."""
    return {
        "event_types": EVENT_TYPES,
        "event_steps": list(run.steps.order_by("position").values_list("step_id", flat=True)),
        "selected_types": types or [],
        "selected_step": step,
    }


def _seq(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _page_url(run: Run, types: list[str], step: str, **bound: int) -> str:
    query = QueryDict(mutable=True)
    query.setlist("type", types)
    if step:
        query["step"] = step
    for name, seq in bound.items():
        query[name] = str(seq)
    return f"{reverse('runs:events', args=[run.pk])}?{query.urlencode()}"


def _page(events: QuerySet[Event], before: int | None, after: int | None) -> tuple[list[Event], bool, bool]:
    """One page in seq order, and whether older and newer events exist.

    With ``after`` the page reads forward from it (bounded by ``before`` if
    given); otherwise it is the newest page before ``before``, or the newest."""
    if after is not None:
        window = events.filter(seq__gt=after)
        if before is not None:
            window = window.filter(seq__lt=before)
        rows = list(window.order_by("seq")[: EVENTS_PER_PAGE + 1])
        newer = len(rows) > EVENTS_PER_PAGE
        rows = rows[:EVENTS_PER_PAGE]
        if not newer and before is not None:
            newer = events.filter(seq__gte=before).exists()
        return rows, events.filter(seq__lte=after).exists(), newer
    window = events if before is None else events.filter(seq__lt=before)
    rows = list(window.order_by("-seq")[: EVENTS_PER_PAGE + 1])
    older = len(rows) > EVENTS_PER_PAGE
    rows = rows[:EVENTS_PER_PAGE][::-1]
    newer = before is not None and events.filter(seq__gte=before).exists()
    return rows, older, newer


@require_safe
def run_events(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET /runs/<id>/events/?type=&type=&step=&before=&after=

    htmx gets the rows (runs/partials/event_stream.html) with a control that
    loads the next page in the direction it was asked for, swapping itself
    out; a plain request gets the whole page with both."""
    run = run_for_user(request, run_id)
    types = [name for name in request.GET.getlist("type") if name]
    step = request.GET.get("step", "")
    before, after = _seq(request.GET.get("before")), _seq(request.GET.get("after"))

    events = Event.objects.filter(run_id=run.pk)
    if types:
        events = events.filter(type__in=types)
    if step:
        events = events.filter(step_id=step)
    rows, older, newer = _page(events, before, after)

    forward = after is not None
    # Where the next pages start: the page's ends, or the bound asked for.
    first = rows[0].seq if rows else (after + 1 if forward else before)
    last = rows[-1].seq if rows else (after if forward else (before or 1) - 1)
    # An htmx page is added to what is already shown: it only goes on the way it was read.
    context = {
        "run": run,
        "events": rows,
        "older_url": _page_url(run, types, step, before=first) if older and not (request.htmx and forward) else "",
        "newer_url": _page_url(run, types, step, after=last) if newer and not (request.htmx and not forward) else "",
        "filtered": bool(types or step),
        # A page the browser shows on its own says it is empty; a page an
        # htmx control adds to the list does not.
        "say_empty": not rows and not (request.htmx and (before is not None or after is not None)),
    }
    if request.htmx:
        response = render(request, "runs/partials/event_stream.html", context)
    else:
        response = render(request, "runs/events.html", context | event_filter_context(run, types, step))
    patch_vary_headers(response, ["HX-Request"])
    return response
