"""The routing graph of a run: the coordinator in the middle, its steps
around it, and the messages between them.

Pure data: ``routing_graph`` reads the run's steps and message counts (two
queries), ``runs.replay`` passes ``graph_of`` the states it rebuilt from
events; both lay the same nodes out the same way, and
templates/runs/partials/routing_graph.html draws either.

Steps sit on a circle, or on rings when there are many. Steps of one
top-level container (loop, forEach, include) are adjacent, on a light arc
band labelled with the container id. Every message goes through the
coordinator, so each step has at most four edges: its sends, the forwards
to it, and a red dashed edge for each direction's drops. A message whose
sender or recipient is no step (a forward to an unknown id) is drawn to a
small "nowhere" node in the corner; its title lists those addresses.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from django.db.models import Count

from agents import ids
from agents.events import types_concerning
from agents.router import COORDINATOR
from runs.models import Message, Run, Step

# Events after which the graph is drawn again on the live page.
GRAPH_EVENTS = types_concerning("graph")

# The node that stands for addresses that are no step. Step ids cannot
# contain "?", so it never clashes with one.
NOWHERE = "?nowhere"

GLYPHS = {
    "pending": "○",
    "running": "◐",
    "completed": "✓",
    "failed": "✕",
    "skipped": "–",
    "cancelled": "–",
}

# (message sender, recipient, drop reason or "") -> how many.
Traffic = Mapping[tuple[str, str, str], int]


@dataclass(frozen=True)
class Scale:
    """Sizes in viewBox units. ``spacing`` is the distance between
    neighbours on a ring (a truncated label fits), ``gap`` between rings;
    ``zoom`` is CSS pixels per unit at full width (smaller when the page is)."""

    node_r: float
    hub_r: float
    font: float
    label_chars: int
    spacing: float
    gap: float
    first_ring: float
    zoom: float


SMALL = Scale(node_r=18, hub_r=30, font=11, label_chars=13, spacing=92, gap=0, first_ring=120, zoom=1.0)
LARGE = Scale(node_r=12, hub_r=26, font=9, label_chars=11, spacing=66, gap=74, first_ring=150, zoom=1.25)
# Up to this many places (steps plus one per container label) share one circle.
ONE_RING = 16


@dataclass(frozen=True)
class Spoke:
    """What the layout needs of a step, whichever source it came from."""

    id: str
    agent: str
    status: str
    kind: str = Step.Kind.STEP
    working: bool = False


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    agent: str
    status: str
    kind: str
    x: float
    y: float
    r: float
    working: bool = False
    group: str = ""
    note: str = ""
    font: float = SMALL.font

    @property
    def glyph(self) -> str:
        return "?" if self.id == NOWHERE else GLYPHS.get(self.status, "·")

    @property
    def title(self) -> str:
        if self.id == NOWHERE:
            return f"not a step: {self.note}"
        parts = [self.id]
        if self.agent and self.agent != self.id:
            parts.append(f"agent {self.agent}")
        parts.append(f"loop, {self.status}" if self.kind == Step.Kind.LOOP else self.status)
        if self.working:
            parts.append("working")
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)

    @property
    def is_hub(self) -> bool:
        return self.id == COORDINATOR

    # Where the template draws things: a loop's square, the label under the
    # node, "working" above it, the glyph scaled to the node.
    @property
    def left(self) -> float:
        return _round(self.x - self.r)

    @property
    def top(self) -> float:
        return _round(self.y - self.r)

    @property
    def side(self) -> float:
        return _round(2 * self.r)

    @property
    def label_y(self) -> float:
        return _round(self.y + self.r + self.font + 1)

    @property
    def working_y(self) -> float:
        return _round(self.y - self.r - 4)

    @property
    def glyph_size(self) -> float:
        return _round(self.r * 1.1)


@dataclass(frozen=True)
class Edge:
    """Messages one way between two nodes: delivered, or dropped (then
    ``reasons`` counts why). ``addresses`` counts the senders or
    recipients behind the nowhere node."""

    source: str
    target: str
    count: int
    dropped: bool
    reasons: tuple[tuple[str, int], ...] = ()
    addresses: tuple[tuple[str, int], ...] = ()
    x1: float = 0
    y1: float = 0
    x2: float = 0
    y2: float = 0
    lx: float = 0
    ly: float = 0
    width: float = 1.5

    @property
    def label(self) -> str:
        return f"✕{self.count}" if self.dropped else str(self.count)

    @property
    def title(self) -> str:
        source = "nowhere" if self.source == NOWHERE else self.source
        target = "nowhere" if self.target == NOWHERE else self.target
        noun = "message" if self.count == 1 else "messages"
        text = f"{source} → {target}: {self.count} {noun}"
        if self.dropped:
            text += " dropped: " + _counted(self.reasons)
        if self.addresses:
            text += f" ({'from' if self.source == NOWHERE else 'to'} {_counted(self.addresses)})"
        return text


@dataclass(frozen=True)
class Group:
    """A top-level container: arc paths behind its steps and a label."""

    id: str
    label: str
    arcs: tuple[str, ...]
    band: float
    lx: float
    ly: float


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    groups: tuple[Group, ...]
    size: float
    scale: Scale

    @property
    def viewbox(self) -> str:
        return f"0 0 {self.size:g} {self.size:g}"

    @property
    def width(self) -> int:
        return round(self.size * self.scale.zoom)

    @property
    def working(self) -> list[Node]:
        return [node for node in self.nodes if node.working]

    def node(self, node_id: str) -> Node | None:
        return next((node for node in self.nodes if node.id == node_id), None)

    def edge(self, source: str, target: str, *, dropped: bool = False) -> Edge | None:
        return next((e for e in self.edges if (e.source, e.target, e.dropped) == (source, target, dropped)), None)


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


def build_graph(hub: Spoke, spokes: Sequence[Spoke], traffic: Traffic) -> Graph:
    """Lay the nodes out and draw the traffic between them."""
    ordered = in_display_order(spokes)
    slots: list[tuple[str, Spoke | None]] = []
    previous = None
    for spoke in ordered:
        group = group_of(spoke)
        if group and group != previous:
            slots.append((group, None))  # the container's label takes a place of its own
        slots.append((group, spoke))
        previous = group
    scale = SMALL if len(slots) <= ONE_RING else LARGE
    places, radii = _ring_places(len(slots), scale)
    outer = max(radii) if radii else scale.first_ring
    centre = outer + scale.node_r + 2 * scale.font + 14
    size = 2 * centre

    nodes = [Node(hub.id, hub.id, hub.agent, hub.status, hub.kind, centre, centre, scale.hub_r, hub.working)]
    for (group, spoke), (ring, angle) in zip(slots, places, strict=True):
        if spoke is not None:
            x, y = _polar(centre, radii[ring], angle)
            label = _truncate(spoke.id, scale.label_chars)
            node = Node(spoke.id, label, spoke.agent, spoke.status, spoke.kind, x, y, scale.node_r)
            nodes.append(replace(node, working=spoke.working, group=group))
    edges, nowhere, to_self = _edges(traffic, {node.id for node in nodes})
    if nowhere:
        corner = size - scale.node_r - 6
        nodes.append(Node(NOWHERE, "nowhere", "", "", "", corner, scale.node_r + 6, scale.node_r * 0.8))
    notes = {node_id: f"to itself: {_counted(counts.items())}" for node_id, counts in to_self.items()}
    notes[NOWHERE] = _counted(nowhere.items())
    nodes = [replace(node, font=scale.font, note=notes.get(node.id, "")) for node in nodes]
    by_id = {node.id: node for node in nodes}
    placed = tuple(_place(edge, by_id[edge.source], by_id[edge.target]) for edge in edges)
    groups = _groups(slots, places, radii, centre, scale)
    return Graph(tuple(nodes), placed, groups, _round(size), scale)


def in_display_order(spokes: Sequence[Spoke]) -> list[Spoke]:
    """Steps under their top-level container, in order of first appearance:
    a loop's later iterations come after the steps that follow the loop, but
    sit inside it (as runs.live.in_display_order does for Step rows)."""
    first: dict[str, int] = {}
    for n, spoke in enumerate(spokes):
        first.setdefault(_top(spoke.id), n)
    return [spoke for _, spoke in sorted(enumerate(spokes), key=lambda item: (first[_top(item[1].id)], item[0]))]


def group_of(spoke: Spoke) -> str:
    """The top-level container a step runs in, or "" for a top-level step.
    A loop's own row belongs to its loop."""
    try:
        parts = ids.parse(spoke.id)
    except ValueError:
        return ""
    if len(parts) > 1 or spoke.kind == Step.Kind.LOOP:
        return parts[0].id
    return ""


def _top(step_id: str) -> str:
    try:
        return ids.parse(step_id)[0].id
    except ValueError:
        return step_id


def _ring_places(count: int, scale: Scale) -> tuple[list[tuple[int, float]], list[float]]:
    """(ring, angle) for each of ``count`` places in order, and the rings'
    radii. Rings fill in proportion to their circumference, so neighbours
    are as far apart on every ring; each ring starts half a place further
    round than the one inside it, so fewer edges cross a node."""
    if count == 0:
        return [], []
    if count <= ONE_RING:
        radius = max(scale.first_ring, count * scale.spacing / (2 * math.pi))
        return [(0, _angle(i, count, 0)) for i in range(count)], [radius]
    radii: list[float] = []
    capacities: list[int] = []
    while sum(capacities) < count:
        radii.append(scale.first_ring + len(radii) * scale.gap)
        capacities.append(int(2 * math.pi * radii[-1] / scale.spacing))
    total = sum(capacities)
    counts = [min(cap, round(count * cap / total)) for cap in capacities]
    while sum(counts) < count:
        ring = max(range(len(counts)), key=lambda k: (capacities[k] - counts[k], k))
        counts[ring] += 1
    while sum(counts) > count:
        ring = max(range(len(counts)), key=lambda k: (counts[k] / capacities[k], k))
        counts[ring] -= 1
    places = [(ring, _angle(i, n, ring)) for ring, n in enumerate(counts) for i in range(n)]
    return places, radii


def _angle(i: int, n: int, ring: int) -> float:
    return -math.pi / 2 + (i + 0.5 * ring) * 2 * math.pi / n


def _polar(centre: float, radius: float, angle: float) -> tuple[float, float]:
    return _round(centre + radius * math.cos(angle)), _round(centre + radius * math.sin(angle))


def _groups(
    slots: Sequence[tuple[str, Spoke | None]],
    places: Sequence[tuple[int, float]],
    radii: Sequence[float],
    centre: float,
    scale: Scale,
) -> tuple[Group, ...]:
    """An arc band per container per ring it reaches, behind its places."""
    spans: dict[str, dict[int, list[float]]] = defaultdict(dict)
    label_at: dict[str, tuple[float, float]] = {}
    per_ring = Counter(ring for ring, _ in places)
    for (group, spoke), (ring, angle) in zip(slots, places, strict=True):
        if not group:
            continue
        spans[group].setdefault(ring, []).append(angle)
        if spoke is None:
            label_at[group] = _polar(centre, radii[ring], angle)
    groups = []
    for group, rings in spans.items():
        arcs = []
        for ring, angles in rings.items():
            pad = 0.42 * 2 * math.pi / per_ring[ring]
            arcs.append(_arc(centre, radii[ring], min(angles) - pad, max(angles) + pad))
        lx, ly = label_at.get(group, (centre, centre))
        label = _truncate(group, scale.label_chars)
        groups.append(Group(group, label, tuple(arcs), band=2 * scale.node_r + 12, lx=lx, ly=ly + scale.font / 3))
    return tuple(groups)


def _arc(centre: float, radius: float, start: float, end: float) -> str:
    """An SVG path along the circle from ``start`` to ``end`` (radians,
    clockwise on screen); a whole circle when the span reaches round."""
    if end - start >= 2 * math.pi - 1e-6:
        x0, y0 = _polar(centre, radius, start)
        x1, y1 = _polar(centre, radius, start + math.pi)
        r = _round(radius)
        return f"M{x0:g} {y0:g}A{r:g} {r:g} 0 1 1 {x1:g} {y1:g}A{r:g} {r:g} 0 1 1 {x0:g} {y0:g}"
    x0, y0 = _polar(centre, radius, start)
    x1, y1 = _polar(centre, radius, end)
    large = 1 if end - start > math.pi else 0
    r = _round(radius)
    return f"M{x0:g} {y0:g}A{r:g} {r:g} 0 {large} 1 {x1:g} {y1:g}"


def _edges(traffic: Traffic, nodes: set[str]) -> tuple[list[Edge], Counter[str], dict[str, Counter[str]]]:
    """One edge per (source, target, delivered or dropped); the addresses
    that are no node (they go to the nowhere node); and messages a node sent
    itself (the router never makes one; they are only noted on the node)."""
    counts: Counter[tuple[str, str, bool]] = Counter()
    reasons: dict[tuple[str, str, bool], Counter[str]] = defaultdict(Counter)
    addresses: dict[tuple[str, str, bool], Counter[str]] = defaultdict(Counter)
    nowhere: Counter[str] = Counter()
    to_self: dict[str, Counter[str]] = defaultdict(Counter)
    for (sender, recipient, reason), n in sorted(traffic.items()):
        if n <= 0:
            continue
        source = sender if sender in nodes else NOWHERE
        target = recipient if recipient in nodes else NOWHERE
        if source == target:
            if source == NOWHERE:
                nowhere.update({sender: n, recipient: n})
            else:
                to_self[sender][reason or "delivered"] += n
            continue
        key = (source, target, bool(reason))
        counts[key] += n
        if reason:
            reasons[key][reason] += n
        for address, end in ((sender, source), (recipient, target)):
            if end == NOWHERE:
                addresses[key][address] += n
                nowhere[address] += n
    edges = []
    for key, n in counts.items():
        source, target, dropped = key
        edges.append(
            Edge(source, target, n, dropped, tuple(sorted(reasons[key].items())), tuple(sorted(addresses[key].items())))
        )
    return edges, nowhere, to_self


def _place(edge: Edge, source: Node, target: Node) -> Edge:
    """Line coordinates between the node rims, shifted sideways so the two
    directions (and their drops) run side by side; arrowheads need room at
    the target end. The label sits nearer the source for delivered
    messages, nearer the middle for drops, so the four labels stay apart."""
    dx, dy = target.x - source.x, target.y - source.y
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    nx, ny = -uy, ux
    offset = 11.0 if edge.dropped else 4.5
    x1 = source.x + ux * (source.r + 2) + nx * offset
    y1 = source.y + uy * (source.r + 2) + ny * offset
    x2 = target.x - ux * (target.r + 3) + nx * offset
    y2 = target.y - uy * (target.r + 3) + ny * offset
    t = 0.55 if edge.dropped else 0.3
    side = offset + 7
    lx = source.x + dx * t + nx * side
    ly = source.y + dy * t + ny * side
    width = 1.2 + min(edge.count, 8) * 0.35
    x1, y1, x2, y2, lx, ly, width = (_round(v) for v in (x1, y1, x2, y2, lx, ly, width))
    return replace(edge, x1=x1, y1=y1, x2=x2, y2=y2, lx=lx, ly=ly, width=width)


def _counted(items: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in items)


def _truncate(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _round(value: float) -> float:
    return round(value, 1)
