"""A run's event stream, a page at a time: filterable by step, type group,
severity and type (the query string: ``step``, ``group``, ``severity``,
``type``, each repeatable), paged by seq in either direction. Keyset paging on the (run, seq) unique
index keeps a page cheap however many events the run has; nothing counts
them all."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.http import HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from agents.events.groups import GROUPS, SEVERITIES, SEVERITY_RULES, types_in
from runs.models import Event, Run
from runs.views.access import run_for_user
from runs.views.htmx_requests import HtmxHttpRequest

EVENTS_PER_PAGE = 200


@dataclass(frozen=True)
class EventFilter:
    """What the event stream is narrowed to; empty lists let everything through."""

    steps: list[str]
    groups: list[str]
    severities: list[str]
    types: list[str]

    @classmethod
    def of(cls, query: QueryDict) -> EventFilter:
        """From the query string; unknown groups and severities are ignored (an unknown type matches nothing)."""
        return cls(
            steps=[s for s in query.getlist("step") if s],
            groups=[g for g in query.getlist("group") if g in GROUPS],
            severities=[s for s in query.getlist("severity") if s in SEVERITIES],
            types=[t for t in query.getlist("type") if t],
        )

    def __bool__(self) -> bool:
        return bool(self.steps or self.groups or self.severities or self.types)

    def apply(self, events: QuerySet[Event]) -> QuerySet[Event]:
        if self.steps:
            events = events.filter(step_id__in=self.steps)
        if self.groups:
            events = events.filter(type__in=types_in(self.groups))
        if self.types:
            events = events.filter(type__in=self.types)
        if self.severities:
            events = events.filter(_severity_q(self.severities))
        return events

    def query(self) -> QueryDict:
        query = QueryDict(mutable=True)
        query.setlist("step", self.steps)
        query.setlist("group", self.groups)
        query.setlist("severity", self.severities)
        query.setlist("type", self.types)
        return query


def _rule_q(type_: str, field: str | None, values: tuple) -> Q:
    return Q(type=type_) if field is None else Q(type=type_, **{f"data__{field}__in": list(values)})


def _severity_q(severities: list[str]) -> Q:
    """The events whose severity (agents.events.groups.severity_of) is one of ``severities``:
    a rule's match, minus those an earlier rule of another severity took; "info" is what no rule takes."""
    chosen = Q(pk__in=[])
    taken = Q(pk__in=[])
    for severity, type_, field, values in SEVERITY_RULES:
        rule = _rule_q(type_, field, values)
        if severity in severities:
            chosen |= rule & ~taken
        taken |= rule
    if "info" in severities:
        chosen |= ~taken
    return chosen


def event_filter_context(run: Run, chosen: EventFilter | None = None) -> dict:
    """What the event filter chips need (runs/partials/event_filters.html)."""
    chosen = chosen or EventFilter([], [], [], [])
    return {
        "event_groups": GROUPS,
        "event_severities": SEVERITIES,
        "event_steps": list(run.steps.order_by("position").values_list("step_id", flat=True)),
        "event_filter": chosen,
    }


def _seq(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _page_url(run: Run, chosen: EventFilter, **bound: int) -> str:
    query = chosen.query()
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


def _ends(rows: list[Event], before: int | None, after: int | None) -> tuple[int, int]:
    """Where the next pages start, older before the first, newer after the
    last: the page's ends, or for an empty page the bound it was read from
    (an empty newest page ends at 0: anything newer is new)."""
    if rows:
        return rows[0].seq, rows[-1].seq
    if after is not None:
        return after + 1, after
    bound = before or 1
    return bound, bound - 1


def newest_page(run: Run, chosen: EventFilter) -> tuple[list[Event], str]:
    """The newest page of the events ``chosen`` lets through, and the address of the older ones ("" if none)."""
    rows, older, _newer = _page(chosen.apply(Event.objects.filter(run_id=run.pk)), None, None)
    return rows, _page_url(run, chosen, before=rows[0].seq) if older and rows else ""


@require_safe
def run_events(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """GET /runs/<id>/events/?step=&group=&severity=&type=&before=&after=

    htmx gets the rows (runs/partials/event_stream.html) with a control that
    loads the next page in the direction it was asked for, swapping itself
    out; a plain request gets the whole page with both."""
    run = run_for_user(request, run_id)
    chosen = EventFilter.of(request.GET)
    before, after = _seq(request.GET.get("before")), _seq(request.GET.get("after"))

    events = chosen.apply(Event.objects.filter(run_id=run.pk))
    rows, older, newer = _page(events, before, after)

    forward = after is not None
    first, last = _ends(rows, before, after)
    # An htmx page is added to what is already shown: it only goes on the way it was read.
    context = {
        "run": run,
        "events": rows,
        "older_url": _page_url(run, chosen, before=first) if older and not (request.htmx and forward) else "",
        "newer_url": _page_url(run, chosen, after=last) if newer and not (request.htmx and not forward) else "",
        "filtered": bool(chosen),
        # A page the browser shows on its own says it is empty; a page an
        # htmx control adds to the list does not.
        "say_empty": not rows and not (request.htmx and (before is not None or after is not None)),
    }
    if request.htmx:
        response = render(request, "runs/partials/event_stream.html", context)
    else:
        response = render(request, "runs/events.html", context | event_filter_context(run, chosen))
    patch_vary_headers(response, ["HX-Request"])
    return response
