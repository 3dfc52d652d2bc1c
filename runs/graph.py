"""The routing graph of a run: the coordinator in the middle, its steps
around it, and the messages between them.

Pure data: ``routing_graph`` reads the run's steps and message counts (two
queries), ``runs.replay`` passes ``graph_of`` the states it rebuilt from
events; both lay the same nodes out the same way, and
templates/runs/partials/routing_graph.html draws either.

The layout (rings, container bands, edges) is in runs/graph_layout.py, what
it is made of in runs/graph_shapes.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from django.db.models import Count

from agents.events import types_concerning
from agents.router import COORDINATOR
from runs.graph_layout import build_graph
from runs.graph_shapes import Graph, Spoke, Traffic
from runs.models import Message, Run, Step

# Events after which the graph is drawn again on the live page.
GRAPH_EVENTS = types_concerning("graph")


GRAPH_STEP_FIELDS = ("run_id", "step_id", "agent", "status", "kind", "position")


def routing_graph(run: Run, steps: Iterable[Step] | None = None, messages: Traffic | None = None) -> Graph:
    """The graph of ``run`` now. ``steps`` (any order) and ``messages``
    (``message_traffic``) may be passed in when already loaded."""
    # Only what a node shows: a big run's transcripts would cost more than the rest.
    steps = list(run.steps.only(*GRAPH_STEP_FIELDS) if steps is None else steps)
    traffic = message_traffic(run) if messages is None else messages
    busy = run.coordinator_busy and not run.is_terminal
    hub_status = next((s.status for s in steps if s.kind == Step.Kind.COORDINATOR), Step.Status.PENDING)
    spokes = [s for s in sorted(steps, key=lambda s: s.position) if s.kind != Step.Kind.COORDINATOR]
    return graph_of(hub_status, busy, spokes, traffic)


class StepLike(Protocol):
    """A step as the graph draws it: a Step row, or a replayed step's state."""

    step_id: str
    agent: str
    status: str
    kind: str


def graph_of(hub_status: str, hub_working: bool, steps: Iterable[StepLike], traffic: Traffic) -> Graph:
    """The graph of the coordinator in ``hub_status`` and of ``steps`` (the
    coordinator's row not among them), laid out in their order."""
    hub = _hub(hub_status, hub_working)
    return build_graph(hub, [_spoke(s.step_id, s.agent, s.status, s.kind) for s in steps], traffic)


def _hub(status: str, working: bool) -> Spoke:
    return Spoke(COORDINATOR, COORDINATOR, status, Step.Kind.COORDINATOR, working)


def _spoke(step_id: str, agent: str, status: str, kind: str) -> Spoke:
    # A step works while it runs; a loop's row only waits for its steps.
    working = kind == Step.Kind.STEP and status == Step.Status.RUNNING
    return Spoke(step_id, agent, status, kind, working)


def message_traffic(run: Run) -> dict[tuple[str, str, str], int]:
    """Message rows counted by sender, recipient and drop reason, in one query."""
    rows = (
        Message.objects.filter(run=run).values("sender", "recipient", "drop_reason").annotate(n=Count("id")).order_by()
    )
    return {(row["sender"], row["recipient"], row["drop_reason"]): row["n"] for row in rows}


def graph_context(run: Run) -> dict:
    """What templates/runs/partials/routing_graph.html needs."""
    return {"run": run, "graph": routing_graph(run)}
