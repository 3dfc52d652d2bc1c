"""Where the routing graph's nodes, edges and container bands go.

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
from collections.abc import Sequence
from dataclasses import replace

from agents import ids
from runs.graph_shapes import (
    LARGE,
    NOWHERE,
    SMALL,
    Edge,
    Graph,
    Group,
    Node,
    Scale,
    Spoke,
    Traffic,
    counted,
    rounded,
)
from runs.models import Step

# Up to this many places (steps plus one per container label) share one circle.
ONE_RING = 16


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
    for (group, member), (ring, angle) in zip(slots, places, strict=True):
        if member is not None:
            x, y = _polar(centre, radii[ring], angle)
            label = _truncate(member.id, scale.label_chars)
            node = Node(member.id, label, member.agent, member.status, member.kind, x, y, scale.node_r)
            nodes.append(replace(node, working=member.working, group=group))
    edges, nowhere, to_self = _edges(traffic, {node.id for node in nodes})
    if nowhere:
        corner = size - scale.node_r - 6
        nodes.append(Node(NOWHERE, "nowhere", "", "", "", corner, scale.node_r + 6, scale.node_r * 0.8))
    notes = {node_id: f"to itself: {counted(counts.items())}" for node_id, counts in to_self.items()}
    notes[NOWHERE] = counted(nowhere.items())
    nodes = [replace(node, font=scale.font, note=notes.get(node.id, "")) for node in nodes]
    by_id = {node.id: node for node in nodes}
    placed = tuple(_place(edge, by_id[edge.source], by_id[edge.target]) for edge in edges)
    groups = _groups(slots, places, radii, centre, scale)
    return Graph(tuple(nodes), placed, groups, rounded(size), scale)


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
    return rounded(centre + radius * math.cos(angle)), rounded(centre + radius * math.sin(angle))


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
        r = rounded(radius)
        return f"M{x0:g} {y0:g}A{r:g} {r:g} 0 1 1 {x1:g} {y1:g}A{r:g} {r:g} 0 1 1 {x0:g} {y0:g}"
    x0, y0 = _polar(centre, radius, start)
    x1, y1 = _polar(centre, radius, end)
    large = 1 if end - start > math.pi else 0
    r = rounded(radius)
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
    x1, y1, x2, y2, lx, ly, width = (rounded(v) for v in (x1, y1, x2, y2, lx, ly, width))
    return replace(edge, x1=x1, y1=y1, x2=x2, y2=y2, lx=lx, ly=ly, width=width)


def _truncate(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"
