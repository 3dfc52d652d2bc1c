"""What the routing graph is made of: nodes, edges, container bands and the
graph, with the SVG coordinates and titles that
templates/runs/partials/routing_graph.html draws (runs/graph_layout.py
places them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agents.router import COORDINATOR
from runs.models import Step

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
        return rounded(self.x - self.r)

    @property
    def top(self) -> float:
        return rounded(self.y - self.r)

    @property
    def side(self) -> float:
        return rounded(2 * self.r)

    @property
    def label_y(self) -> float:
        return rounded(self.y + self.r + self.font + 1)

    @property
    def working_y(self) -> float:
        return rounded(self.y - self.r - 4)

    @property
    def glyph_size(self) -> float:
        return rounded(self.r * 1.1)


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
            text += " dropped: " + counted(self.reasons)
        if self.addresses:
            text += f" ({'from' if self.source == NOWHERE else 'to'} {counted(self.addresses)})"
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


def counted(items: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in items)


def rounded(value: float) -> float:
    return round(value, 1)
