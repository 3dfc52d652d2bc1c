"""What the run's graph is made of: nodes (the coordinator, steps, loops,
workers, child runs), edges (dependencies, spawns, child runs, messages
sent, forwarded and dropped) and the containers that box steps together.

No coordinates: runs/static/js/graph.js lays the graph out in the browser (with
the vendored dagre) from ``Graph.data()``, which
runs/templates/runs/partials/routing_graph.html embeds as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The node that stands for addresses that are no step. Step ids cannot
# contain "?", so it never clashes with one.
NOWHERE = "?nowhere"

# (message sender, recipient, drop reason or "") -> how many.
Traffic = Mapping[tuple[str, str, str], int]


class NodeKind:
    COORDINATOR = "coordinator"
    STEP = "step"
    LOOP = "loop"
    WORKER = "worker"
    CHILD = "child"
    NOWHERE = "nowhere"


class EdgeKind:
    """``depends``: the target waits for the source; ``spawn``: the
    coordinator spawned a worker; ``child``: a step's tool call started a
    child run; ``sent``: messages a step sent the coordinator; ``forward``:
    messages the coordinator sent or forwarded to a step; ``drop``: messages
    dropped on the way (red, the reasons in the title)."""

    DEPENDS = "depends"
    SPAWN = "spawn"
    CHILD = "child"
    SENT = "sent"
    FORWARD = "forward"
    DROP = "drop"


@dataclass(frozen=True)
class GraphStep:
    """What the graph needs of a step, whichever source it came from (a Step
    row, or a replayed step's state with the row's structure)."""

    id: str
    agent: str
    status: str
    kind: str = "step"
    working: bool = False
    depends_on: tuple[str, ...] = ()
    spawned_by: str = ""
    container: str = ""
    # A forked run's step whose result is its parent run's (runs/actions/fork_reuse.py).
    reused: bool = False


@dataclass(frozen=True)
class ChildRun:
    """A run started by a tool call of one of this run's steps."""

    run_id: int
    workflow: str
    status: str
    step_id: str
    url: str


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    status: str
    detail: str = ""
    working: bool = False
    container: str = ""
    url: str = ""
    note: str = ""

    @property
    def title(self) -> str:
        if self.kind == NodeKind.NOWHERE:
            return f"not a step: {self.note}"
        parts = [self.id, self.detail, self.status]
        if self.container:
            parts.append(f"in {self.container}")
        if self.working:
            parts.append("working")
        if self.note:
            parts.append(self.note)
        return " · ".join(part for part in parts if part)

    def data(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "detail": self.detail,
            "working": self.working,
            "container": self.container,
            "url": self.url,
            "title": self.title,
        }


@dataclass(frozen=True)
class Edge:
    """One kind of link between two nodes; message edges count messages
    (``reasons`` counts a drop's reasons, ``addresses`` the senders or
    recipients behind the nowhere node)."""

    source: str
    target: str
    kind: str
    count: int = 0
    reasons: tuple[tuple[str, int], ...] = ()
    addresses: tuple[tuple[str, int], ...] = ()

    @property
    def dropped(self) -> bool:
        return self.kind == EdgeKind.DROP

    @property
    def counted(self) -> bool:
        return self.kind in (EdgeKind.SENT, EdgeKind.FORWARD, EdgeKind.DROP)

    @property
    def label(self) -> str:
        if not self.counted:
            return ""
        return f"✕{self.count}" if self.dropped else str(self.count)

    @property
    def title(self) -> str:
        source = "nowhere" if self.source == NOWHERE else self.source
        target = "nowhere" if self.target == NOWHERE else self.target
        if self.kind == EdgeKind.DEPENDS:
            return f"{target} waits for {source}"
        if self.kind == EdgeKind.SPAWN:
            return f"{source} spawned {target}"
        if self.kind == EdgeKind.CHILD:
            return f"{source} started {target}"
        noun = "message" if self.count == 1 else "messages"
        verb = {EdgeKind.SENT: "sent", EdgeKind.FORWARD: "sent or forwarded"}.get(self.kind, "dropped")
        text = f"{source} → {target}: {self.count} {noun} {verb}"
        if self.dropped:
            text += ": " + counted(self.reasons)
        if self.addresses:
            text += f" ({'from' if self.source == NOWHERE else 'to'} {counted(self.addresses)})"
        return text

    def data(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "kind": self.kind,
            "count": self.count,
            "label": self.label,
            "title": self.title,
        }


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    # Container runtime id -> its enclosing container's ("" at top level).
    containers: Mapping[str, str]

    @property
    def working(self) -> list[Node]:
        return [node for node in self.nodes if node.working]

    def node(self, node_id: str) -> Node | None:
        return next((node for node in self.nodes if node.id == node_id), None)

    def edge(self, source: str, target: str, kind: str) -> Edge | None:
        return next((e for e in self.edges if (e.source, e.target, e.kind) == (source, target, kind)), None)

    def data(self) -> dict[str, Any]:
        """What runs/static/js/graph.js draws."""
        return {
            "nodes": [node.data() for node in self.nodes],
            "edges": [edge.data() for edge in self.edges],
            "containers": [{"id": c, "parent": parent} for c, parent in self.containers.items()],
        }


def counted(items: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} ×{n}" for name, n in items)
