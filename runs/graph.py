"""The graph of a run's structure: the coordinator, every step and loop
iteration, every spawned worker and child run; what waits for what, who
spawned whom, and the messages between them (sent, forwarded, dropped).

Pure data: ``routing_graph`` reads the run's steps, message counts and
child runs (three queries); ``runs.replay`` passes ``graph_of`` the states
it rebuilt from events. runs/templates/runs/partials/routing_graph.html embeds
``Graph.data()`` as JSON and runs/static/js/graph.js lays it out and draws it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from django.db.models import Count
from django.urls import reverse

from agents import ids
from agents.events import types_concerning
from agents.router import COORDINATOR
from runs.graph_shapes import NOWHERE, ChildRun, Edge, EdgeKind, Graph, GraphStep, Node, NodeKind, Traffic, counted
from runs.models import Message, Run, Step

# Events after which the graph is drawn again on the live page.
GRAPH_EVENTS = types_concerning("graph")


GRAPH_STEP_FIELDS = (
    "run_id",
    "step_id",
    "agent",
    "status",
    "kind",
    "position",
    "depends_on",
    "spawned_by",
    "container",
    "reused_from_id",
)


def routing_graph(run: Run, steps: Iterable[Step] | None = None, messages: Traffic | None = None) -> Graph:
    """The graph of ``run`` now. ``steps`` (any order) and ``messages``
    (``message_traffic``) may be passed in when already loaded."""
    # Only what a node shows: a big run's transcripts would cost more than the rest.
    rows = list(run.steps.only(*GRAPH_STEP_FIELDS) if steps is None else steps)
    traffic = message_traffic(run) if messages is None else messages
    busy = run.coordinator_busy and not run.is_terminal
    hub_status = next((s.status for s in rows if s.kind == Step.Kind.COORDINATOR), Step.Status.PENDING)
    ordered = sorted((s for s in rows if s.kind != Step.Kind.COORDINATOR), key=lambda s: s.position)
    return graph_of(hub_status, busy, [graph_step(s) for s in ordered], traffic, child_runs(run))


def graph_step(step: Step, status: str | None = None) -> GraphStep:
    """A Step row as the graph draws it (in ``status``, when a replay says so)."""
    status = step.status if status is None else status
    # A step works while it runs; a loop's row only waits for its steps.
    working = step.kind == Step.Kind.STEP and status == Step.Status.RUNNING
    deps = tuple(step.depends_on or ())
    reused = step.reused_from_id is not None
    return GraphStep(
        step.step_id, step.agent, status, step.kind, working, deps, step.spawned_by, step.container, reused
    )


def child_runs(run: Run) -> list[ChildRun]:
    """The runs this run's tool calls started, in one query."""
    rows = (
        Run.objects.filter(parent_tool_call__run=run)
        .values_list("pk", "workflow__name", "status", "parent_tool_call__step__step_id")
        .order_by("pk")
    )
    return [
        ChildRun(pk, workflow, status, step_id or COORDINATOR, reverse("runs:detail", args=[pk]))
        for pk, workflow, status, step_id in rows
    ]


def graph_of(
    hub_status: str,
    hub_working: bool,
    steps: Sequence[GraphStep],
    traffic: Traffic,
    children: Sequence[ChildRun] = (),
) -> Graph:
    """The graph of the coordinator in ``hub_status``, of ``steps`` (the
    coordinator's row not among them, in their order), their messages and
    the child runs."""
    nodes = [Node(COORDINATOR, NodeKind.COORDINATOR, hub_status, "hub", hub_working)]
    nodes += [_step_node(step) for step in steps]
    nodes += [_child_node(child) for child in children]
    known = {node.id for node in nodes}
    edges = _structure_edges(steps, known)
    edges += [Edge(child.step_id, f"run:{child.run_id}", EdgeKind.CHILD) for child in children]
    message_edges, nowhere, to_self = _message_edges(traffic, known)
    if nowhere:
        nodes.append(Node(NOWHERE, NodeKind.NOWHERE, "", "nowhere", note=counted(nowhere.items())))
    notes = {node_id: f"to itself: {counted(n.items())}" for node_id, n in to_self.items()}
    if notes:
        nodes = [_noted(node, notes.get(node.id, "")) for node in nodes]
    return Graph(tuple(nodes), tuple(edges + message_edges), _containers(steps))


def _step_node(step: GraphStep) -> Node:
    if step.kind == Step.Kind.LOOP:
        kind, detail = NodeKind.LOOP, "loop"
    elif step.spawned_by:
        kind, detail = NodeKind.WORKER, f"worker · {step.agent}"
    else:
        kind, detail = NodeKind.STEP, step.agent
    if step.reused:
        detail += " · reused"
    boxes = _boxes(step)
    return Node(step.id, kind, step.status, detail, step.working, container=boxes[-1] if boxes else "")


def _child_node(child: ChildRun) -> Node:
    node_id = f"run:{child.run_id}"
    return Node(node_id, NodeKind.CHILD, child.status, f"run #{child.run_id} · {child.workflow}", url=child.url)


def _noted(node: Node, note: str) -> Node:
    if not note:
        return node
    return Node(node.id, node.kind, node.status, node.detail, node.working, node.container, node.url, note)


def _boxes(step: GraphStep) -> list[str]:
    """The containers a step sits in, outermost first: a loop or forEach
    and each of its iterations (``refine``, ``refine.0``), an include. A
    loop's own row sits in its loop's box."""
    try:
        parts = ids.parse(step.id)
    except ValueError:
        return []
    boxes: list[str] = []
    for n, part in enumerate(parts[:-1]):
        if part.kind in ("repeat", "each"):
            boxes.append(ids.format_id([*parts[:n], ids.Part(part.id, "step")]))
        boxes.append(ids.format_id(parts[: n + 1]))
    if step.kind == Step.Kind.LOOP:
        boxes.append(step.id)
    return boxes


def _containers(steps: Iterable[GraphStep]) -> dict[str, str]:
    """Each box the steps sit in -> the box around it ("" at the top)."""
    found: dict[str, str] = {}
    for step in steps:
        boxes = _boxes(step)
        for n, box in enumerate(boxes):
            found.setdefault(box, boxes[n - 1] if n else "")
    return found


def _structure_edges(steps: Iterable[GraphStep], known: set[str]) -> list[Edge]:
    """What waits for what, and the coordinator's spawns. A dependency on a
    node not drawn (a container without a row) is left out."""
    steps = list(steps)
    edges = _loop_edges(steps)
    for step in steps:
        if step.spawned_by:
            edges.append(Edge(COORDINATOR, step.id, EdgeKind.SPAWN))
        edges += [Edge(dep, step.id, EdgeKind.DEPENDS) for dep in step.depends_on if dep in known]
    return edges


def _loop_edges(steps: Sequence[GraphStep]) -> list[Edge]:
    """A repeat-until loop's row waits for its iterations: an edge from each
    iteration's last steps (those no other step of it waits for) to the row."""
    edges = []
    for loop in (s for s in steps if s.kind == Step.Kind.LOOP):
        members = [s for s in steps if s.kind != Step.Kind.LOOP and s.id.startswith(loop.id + ".")]
        waited_for = {dep for s in members for dep in s.depends_on}
        edges += [Edge(s.id, loop.id, EdgeKind.DEPENDS) for s in members if s.id not in waited_for]
    return edges


def _message_edges(traffic: Traffic, nodes: set[str]) -> tuple[list[Edge], Counter[str], dict[str, Counter[str]]]:
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
    edges = [
        Edge(
            source,
            target,
            _message_kind(source, dropped),
            n,
            tuple(sorted(reasons[(source, target, dropped)].items())),
            tuple(sorted(addresses[(source, target, dropped)].items())),
        )
        for (source, target, dropped), n in counts.items()
    ]
    return edges, nowhere, to_self


def _message_kind(source: str, dropped: bool) -> str:
    if dropped:
        return EdgeKind.DROP
    return EdgeKind.FORWARD if source == COORDINATOR else EdgeKind.SENT


def message_traffic(run: Run) -> dict[tuple[str, str, str], int]:
    """Message rows counted by sender, recipient and drop reason, in one query."""
    rows = (
        Message.objects.filter(run=run).values("sender", "recipient", "drop_reason").annotate(n=Count("id")).order_by()
    )
    return {(row["sender"], row["recipient"], row["drop_reason"]): row["n"] for row in rows}


def graph_context(run: Run) -> dict:
    """What runs/templates/runs/partials/routing_graph.html needs."""
    return {"run": run, "graph": routing_graph(run)}
