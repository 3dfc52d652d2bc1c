"""The live fragments of a run page: what a websocket sends and what the
page renders first. Fragment ids match the DOM ids they replace."""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import Counter, OrderedDict
from collections.abc import Mapping

from channels.db import database_sync_to_async
from django.conf import settings
from django.db.models import Count, F, Prefetch
from django.template.loader import render_to_string

from agents import ids
from agents.events import parse, types_concerning
from agents.events.registry import type_of
from agents.events.run_events import CoordinatorMessage, MessageDropped, MessageSent, WorkflowEnd
from agents.events.tool_events import (
    ApprovalDecided,
    ApprovalLapsed,
    ApprovalRequested,
    InputReceived,
    WaitingForInput,
)
from runs.actions.budgets import TokenTotals, totals_from, totals_of
from runs.actions.command_results import coordinator_result
from runs.actions.costs import cost_of, shown
from runs.graph import GRAPH_EVENTS, routing_graph
from runs.models import Command, Event, Message, Run, Step, ToolCall
from runs.store.sql import store

BATCH = 500


def events_after(run_id: int, after: int, limit: int = BATCH) -> list[Event]:
    return store().live_events_after(run_id, after, limit)


def run_context(run: Run, *, graph: bool = True) -> dict:
    """The run header and step list (and, with ``graph``, the routing graph)."""
    steps = in_display_order(list(run.steps.defer("transcript", "variables")))
    _count_unread(run, steps)
    work = [s for s in steps if s.kind == "step"]
    ended = Counter(s.status for s in work if s.is_terminal)
    return _header(run, totals_of(steps), ended, len(work)) | {
        "cost": _cost_shown(run, steps),
        "steps": steps,
        "graph": routing_graph(run, steps=steps) if graph else None,
    }


def _cost_shown(run: Run, steps: list[Step]) -> str:
    """The run's cost for its page ("no price" naming the models without
    one); each step's set as ``step.cost_shown``."""
    cost = cost_of(run, steps)
    for step in steps:
        step.cost_shown = shown(cost.by_step[step.pk])
    return shown(cost.total) + (f" ({', '.join(cost.unpriced)})" if cost.unpriced else "")


def _header(run: Run, tokens: TokenTotals, ended: Mapping[str, int], total: int) -> dict:
    return {
        "run": run,
        # Set for exactly the span between its agent_wake and agent_idle events.
        "coordinator_working": run.coordinator_busy and not run.is_terminal,
        "steps_total": total,
        # How they ended: only completed steps count as done (step_progress).
        "steps_ended": [(status, n) for status in Step.TERMINAL if (n := ended.get(status))],
        # By role, with the coordinator's share ("coordination overhead").
        "tokens": tokens,
    }


def _count_unread(run: Run, steps: list[Step]) -> None:
    """Set each step's ``unread``: how many messages wait in its mailbox."""
    unread = Message.objects.filter(run=run, drained=None, drop_reason="")
    if len(steps) < 100:  # a few rows of a live update: count only theirs
        unread = unread.filter(recipient__in=[s.step_id for s in steps])
    counts = dict(unread.values_list("recipient").annotate(n=Count("id")).values_list("recipient", "n"))
    for step in steps:
        step.unread = counts.get(step.step_id, 0)


# Events that add steps, or change steps without naming them (a cancel's
# run-level event): after one, the whole step list is drawn again.
STEP_LIST_EVENTS = types_concerning("new_steps")


# Events that name a recipient (``to``): read as models only these, the
# rest of a live update needs no more than the row's type and step.
ADDRESSED = frozenset(type_of(model) for model in (MessageSent, MessageDropped, CoordinatorMessage))


def changed_steps(events: list[Event]) -> set[str] | None:
    """The steps whose rows ``events`` may have changed (a message changes
    its recipient's inbox count too), or None if the whole list must be
    drawn: a run-level event (no step) or one in STEP_LIST_EVENTS."""
    changed: set[str] = set()
    for event in events:
        if not event.step_id or event.type in STEP_LIST_EVENTS:
            return None
        changed.add(event.step_id)
        if event.type in ADDRESSED:
            match parse(event.type, event.data):
                case MessageSent(to=to) | MessageDropped(to=to) | CoordinatorMessage(to=to):
                    changed.add(to)
    return changed


# Events after which the tool-call table is drawn again.
TOOL_EVENTS = types_concerning("tool_calls")
TOOL_CALLS_SHOWN = 200


def tool_calls_context(run: Run) -> dict:
    """The latest tool calls with their artifacts and child runs, oldest first."""
    # The newest ids first, then only their rows: sorting every call of a
    # busy run joined to its step costs more than the rest of the table.
    newest = ToolCall.objects.filter(run=run).order_by("-id").values("id")[:TOOL_CALLS_SHOWN]
    calls = (
        ToolCall.objects.filter(id__in=newest)
        # The row shows only its step's id.
        .annotate(step_ref=F("step__step_id"))
        # Into lists (to_attr): Django otherwise builds a related manager and
        # a queryset per call and relation, a third of the run page's time.
        .prefetch_related(
            Prefetch("artifacts", to_attr="artifact_list"), Prefetch("child_runs", to_attr="child_run_list")
        )
        .order_by("id")
    )
    return {"tool_calls": list(calls), "tool_calls_total": run.tool_calls.count()}


# Events after which the claims and coordinator result are drawn again.
GOVERNANCE_EVENTS = types_concerning("governance")
# Events after which each page fetches its approvals card again: it is drawn
# for the person who looks (who may decide), which a live update, the same
# for everyone, cannot be (runs/views/run_approvals.py).
APPROVAL_EVENTS = frozenset(
    type_of(model)
    for model in (ApprovalRequested, ApprovalDecided, ApprovalLapsed, WaitingForInput, InputReceived, WorkflowEnd)
)


def governance_context(run: Run) -> dict:
    """What people read: the claims and the coordinator's result."""
    command = Command.objects.filter(run=run).first()
    return {
        "claims": list(run.claims.all()),
        "coordinator_result": coordinator_result(run, command) if command or run.is_terminal else None,
    }


def in_display_order(steps: list[Step]) -> list[Step]:
    """Steps under their top-level container: a loop's later iterations are
    created after the steps that follow the loop, but show inside it."""
    first: dict[str, int] = {}
    for step in steps:
        top = ids.parse(step.step_id)[0].id
        first[top] = min(first.get(top, step.position), step.position)
    return sorted(steps, key=lambda s: (first[ids.parse(s.step_id)[0].id], s.position))


class _RecentUpdates:
    """The last few updates this process rendered, by (run, cursor).

    Every dashboard watching a run asks for the same update (the HTML does
    not depend on who watches), mostly from the same cursor: the first one
    renders it, the others get the copy. A copy is never stale in what it
    covers: events do not change, and every change to a run comes with an
    event, so anything newer arrives as events after the copy's last seq,
    which the consumer asks for next."""

    def __init__(self, size: int = 128, ttl: float = 5.0) -> None:
        self.size = size
        self.ttl = ttl
        self._items: OrderedDict[tuple[int, int], tuple[float, str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int]) -> tuple[str, int] | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or time.monotonic() - item[0] > self.ttl:
                return None
            return item[1], item[2]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def put(self, key: tuple[int, int], html: str, last: int) -> None:
        with self._lock:
            self._items[key] = (time.monotonic(), html, last)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


RECENT_UPDATES = _RecentUpdates()


def render_update(run_id: int, after: int) -> tuple[str, int]:
    """HTML for everything after event ``after``, swapped out-of-band, and the
    last seq it covers. Empty string when nothing is new. Dashboards on the
    same cursor share one rendering (``RECENT_UPDATES``)."""
    cached = RECENT_UPDATES.get((run_id, after))
    if cached is not None:
        return cached
    html, last = _render_update(run_id, after)
    if html:
        RECENT_UPDATES.put((run_id, after), html, last)
    return html, last


# Per event loop: the renders under way, by (run, cursor).
_RENDERING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, int], asyncio.Future]] = (
    weakref.WeakKeyDictionary()
)


async def shared_update(run_id: int, after: int) -> tuple[str, int]:
    """``render_update`` for the websocket consumers of this process.

    channels runs every database_sync_to_async call of a process on one
    thread, so 20 dashboards asking for the same update would be 20 trips
    through that queue, most of them for a cached copy. Here a copy is
    taken on the event loop, and a dashboard asking while another renders
    the same update waits for that rendering: one trip per update.

    A read that was under way when the caller asked may have started
    before the event the caller heard of committed: its result can end
    before that event, or be empty (see RunConsumer.catch_up)."""
    key = (run_id, after)
    cached = RECENT_UPDATES.get(key)
    if cached is not None:
        return cached
    rendering = _RENDERING.setdefault(asyncio.get_running_loop(), {})
    future = rendering.get(key)
    if future is None:
        future = asyncio.ensure_future(database_sync_to_async(render_update)(run_id, after))
        rendering[key] = future
        future.add_done_callback(lambda _: rendering.pop(key, None))
    # Shielded: a dashboard that leaves does not cancel the others' update.
    return await asyncio.shield(future)


def _render_update(run_id: int, after: int) -> tuple[str, int]:
    events = events_after(run_id, after)
    if not events:
        return "", after
    # With the header's figures, summed by the database: a live update need
    # not load every step of a big run to redraw the header.
    run, ended, total, token_sums = store().live_run_header(run_id)
    tokens = totals_from(token_sums)
    redraw_graph = any(event.type in GRAPH_EVENTS for event in events)
    # A big run's graph is marked stale instead: each page fetches it at
    # most once a second (routing_graph.html). The last update draws it.
    graph_stale = redraw_graph and not _draws_graph(run, events)
    redraw_graph = redraw_graph and not graph_stale
    changed = changed_steps(events)
    if changed is None or redraw_graph:
        context = run_context(run, graph=redraw_graph)
    else:
        context = _header(run, tokens, ended, total)
    if changed is not None:
        # Only the rows these events touched: a 500-step run's whole list
        # is about 400 KB, too much to send to every dashboard on every update.
        shown = context.get("steps")
        context["step_rows"] = (
            [s for s in shown if s.step_id in changed] if shown is not None else store().live_step_rows(run.pk, changed)
        )
    context |= {"events": events, "last_seq": events[-1].seq, "graph_seq": events[-1].seq, "oob": True}
    if any(event.type in TOOL_EVENTS for event in events):
        context |= tool_calls_context(run) | {"tool_calls_changed": True}
    if any(event.type in GOVERNANCE_EVENTS for event in events):
        context |= governance_context(run) | {"governance_changed": True}
    html: str = render_to_string("runs/partials/live_update.html", context)
    if any(event.type in APPROVAL_EVENTS for event in events):
        html += render_to_string("runs/partials/approvals_changed.html", context)
    if redraw_graph:
        html += render_to_string("runs/partials/routing_graph.html", context)
    elif graph_stale:
        html += render_to_string("runs/partials/graph_stale.html", context)
    if context.get("step_rows"):
        html += FRAME_BREAK + render_to_string("runs/partials/step_rows_update.html", context)
    return html, events[-1].seq


# Between two websocket frames of one update (consumers.py splits there).
# htmx parses each frame on its own, and the HTML parser drops a <tbody>
# that follows other elements: a step's rows go in a frame they begin.
FRAME_BREAK = "<!-- frame -->"


def _draws_graph(run: Run, events: list[Event]) -> bool:
    """Whether a live update draws the routing graph itself (a run of at
    most ZENWEB_LIVE_GRAPH_STEPS steps, or the update that ends the run)."""
    if any(event.type == "workflow_end" for event in events):
        return True
    return run.steps.count() <= settings.ZENWEB_LIVE_GRAPH_STEPS
