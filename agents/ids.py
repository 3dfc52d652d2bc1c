"""Runtime ids of steps inside containers, and how a target id is resolved.

A step inside a container runs under a namespaced runtime id:

- repeat-until loop ``refine``, iteration N, inner step ``draft``: ``refine.N.draft``
- forEach loop ``deploy``, iteration N, inner step ``ship``: ``deploy[N].ship``
- include step ``staging``, step ``run`` of the included workflow: ``staging.run``

The forms compose for nested containers, e.g. ``outer.1.inner[0].x``. A step id
never starts with a digit, so ``refine.0`` is always an iteration, never a step.

Resolving a target (``resolve``): the router accepts a live runtime id or the bare
inner id (or any trailing part of a runtime id, such as ``staging.run`` for
``outer.1.staging.run``). The rules, in order:

1. ``exact``: the target is a live runtime id.
2. ``container``: the target is a container id the spec declares (its runtime
   id, or the bare id of a container nested in a loop) or the namespace of live
   steps (``refine``, ``refine.1``, ``deploy[0]``, ``staging``); the router
   answers ``rejected: <target> is a loop container; forward to one of its
   steps: [...]`` (``an include container`` for an include). A container id wins over a step of the same id in
   another container.
3. ``bare``: the target ends one or more live runtime ids. One match is the
   answer. With several, the match in the sender's own container iteration
   wins: of the matches whose namespace encloses the sender, the one with the
   deepest namespace (so a critic in ``refine.1`` that says ``draft`` reaches
   ``refine.1.draft``). Failing that (the coordinator, or a sender in another
   container), the latest match in live order wins: the newest iteration.
4. ``container`` again when the target ends a live container's id
   (``inner`` for ``refine.0.inner``).
5. ``unknown``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

PartKind = Literal["step", "include", "repeat", "each"]
ContainerKind = Literal["loop", "include"]
ResolutionKind = Literal["exact", "bare", "container", "unknown"]

_PART = re.compile(r"(?P<id>[a-zA-Z][a-zA-Z0-9_-]{0,63})(?:\[(?P<each>\d+)\])?")
_INDEX = re.compile(r"\d+")


class Part(NamedTuple):
    """One link of a runtime id: a step or container id, how it is entered
    (``repeat`` iteration, ``each`` iteration, ``include``), and the iteration."""

    id: str
    kind: PartKind
    index: int | None = None  # type: ignore[assignment]  # shadows tuple.index, which no caller uses


def repeat_id(loop_id: str, n: int, inner: str) -> str:
    """``refine``, 2, ``draft`` -> ``refine.2.draft``."""
    return f"{loop_id}.{n}.{inner}"


def each_id(loop_id: str, n: int, inner: str) -> str:
    """``deploy``, 0, ``ship`` -> ``deploy[0].ship``."""
    return f"{loop_id}[{n}].{inner}"


def include_id(inc_id: str, inner: str) -> str:
    """``staging``, ``run`` -> ``staging.run``."""
    return f"{inc_id}.{inner}"


def parse(runtime_id: str) -> list[Part]:
    """The chain of parts of a runtime id, outermost first.

    ``outer.1.inner[0].x`` -> ``[Part("outer", "repeat", 1), Part("inner", "each", 0),
    Part("x", "step")]``. A last part without an index is a ``step`` (it may also
    name a container: the syntax cannot tell). Raises ValueError for text that is
    not a runtime id.
    """
    tokens = runtime_id.split(".")
    parts: list[Part] = []
    i = 0
    while i < len(tokens):
        match = _PART.fullmatch(tokens[i])
        if match is None:
            raise ValueError(f"not a runtime id: {runtime_id!r}")
        if match["each"] is not None:
            parts.append(Part(match["id"], "each", int(match["each"])))
        elif i + 1 < len(tokens) and _INDEX.fullmatch(tokens[i + 1]):
            parts.append(Part(match["id"], "repeat", int(tokens[i + 1])))
            i += 1
        elif i + 1 < len(tokens):
            parts.append(Part(match["id"], "include"))
        else:
            parts.append(Part(match["id"], "step"))
        i += 1
    return parts


def format_id(parts: Sequence[Part]) -> str:
    """The runtime id of a chain of parts; the inverse of ``parse``."""
    tokens: list[str] = []
    for part in parts:
        if part.kind == "each":
            tokens.append(f"{part.id}[{part.index}]")
        elif part.kind == "repeat":
            tokens.extend([part.id, str(part.index)])
        else:
            tokens.append(part.id)
    return ".".join(tokens)


def bare(runtime_id: str) -> str:
    """The innermost step id: ``refine.0.draft`` -> ``draft``."""
    return parse(runtime_id)[-1].id


def container_of(runtime_id: str) -> str | None:
    """The namespace the step runs in, iteration included: ``refine.0.draft`` ->
    ``refine.0``, ``deploy[1].ship`` -> ``deploy[1]``, ``staging.run`` ->
    ``staging``; None for a top-level step."""
    parts = parse(runtime_id)
    return format_id(parts[:-1]) or None


def namespaces(runtime_id: str) -> list[str]:
    """Every enclosing namespace, outermost first: ``outer.1.inner[0].x`` ->
    ``["outer.1", "outer.1.inner[0]"]``."""
    parts = parse(runtime_id)
    return [format_id(parts[:n]) for n in range(1, len(parts))]


def loops_of(runtime_id: str) -> list[str]:
    """The runtime id of every loop ``runtime_id`` runs in, outermost first:
    ``outer.1.inner[0].x`` -> ``["outer", "outer.1.inner"]``."""
    parts = parse(runtime_id)
    return [
        format_id([*parts[:n], part._replace(kind="step", index=None)])
        for n, part in enumerate(parts[:-1])
        if part.kind in ("repeat", "each")
    ]


@dataclass(frozen=True)
class Resolution:
    """What a target id names. ``runtime_id`` is the step (``exact``, ``bare``)
    or the container (``container``); ``candidates`` lists every bare match, or
    the live steps inside the container; ``rule`` says how a bare match was
    chosen (``unique``, ``sender``, ``latest``)."""

    kind: ResolutionKind
    target: str
    runtime_id: str | None = None
    candidates: tuple[str, ...] = ()
    container_kind: ContainerKind | None = None
    rule: str = ""

    def rejection(self) -> str:
        """The tool result for a forward to a container."""
        steps = ", ".join(self.candidates) if self.candidates else "none is running"
        kinds = {"loop": "a loop container", "include": "an include container"}
        kind = kinds.get(self.container_kind or "", "a container")
        return f"rejected: {self.target} is {kind}; forward to one of its steps: [{steps}]"


def resolve(
    target: str,
    live_ids: Sequence[str],
    sender: str | None,
    container_ids: Collection[str] | Mapping[str, ContainerKind],
) -> Resolution:
    """Resolve ``target`` against the live runtime ids (oldest first); see the
    module docstring for the rules. ``container_ids`` holds container runtime
    ids and bare container ids (``agents.expansion.container_ids``); a mapping
    to ``loop``/``include`` (``agents.expansion.container_kinds``) also names
    the kind for the rejection text."""
    target = target.strip()
    live = list(dict.fromkeys(live_ids))
    if target in live:
        return Resolution("exact", target, target, (target,))

    kinds = dict(container_ids) if isinstance(container_ids, Mapping) else dict.fromkeys(container_ids)
    prefixes = _live_containers(live)
    if target in prefixes or target in kinds:
        return _container(target, target, live, prefixes, kinds)

    if _PART.match(target) is None:
        return Resolution("unknown", target)
    matches = tuple(runtime_id for runtime_id in live if runtime_id.endswith("." + target))
    if len(matches) == 1:
        return Resolution("bare", target, matches[0], matches, rule="unique")
    if matches:
        chosen = _in_sender_namespace(matches, sender)
        if chosen is not None:
            return Resolution("bare", target, chosen, matches, rule="sender")
        return Resolution("bare", target, matches[-1], matches, rule="latest")

    containers = [c for c in prefixes if c.endswith("." + target)]
    if containers:
        chosen = _in_sender_namespace(tuple(containers), sender) or containers[-1]
        return _container(target, chosen, live, prefixes, kinds)
    return Resolution("unknown", target)


def _live_containers(live: Sequence[str]) -> dict[str, ContainerKind]:
    """Every container and iteration namespace of the live ids, in order of
    first appearance, with its kind."""
    found: dict[str, ContainerKind] = {}
    for runtime_id in live:
        try:
            parts = parse(runtime_id)
        except ValueError:
            continue
        for n, part in enumerate(parts[:-1]):
            kind: ContainerKind = "include" if part.kind == "include" else "loop"
            found.setdefault(format_id([*parts[:n], Part(part.id, "step")]), kind)
            if part.kind != "include":
                found.setdefault(format_id(parts[: n + 1]), kind)
    return found


def _container(
    target: str,
    container: str,
    live: Sequence[str],
    prefixes: Mapping[str, ContainerKind],
    kinds: Mapping[str, ContainerKind | None],
) -> Resolution:
    inside = tuple(r for r in live if r.startswith(container + ".") or r.startswith(container + "["))
    kind = kinds.get(container) or prefixes.get(container)
    return Resolution("container", target, container, inside, kind)


def _in_sender_namespace(matches: Sequence[str], sender: str | None) -> str | None:
    """The match whose namespace encloses the sender most closely (the latest
    of equals), or None when no match shares a namespace with the sender."""
    if not sender:
        return None
    try:
        enclosing = set(namespaces(sender))
    except ValueError:
        return None
    best: str | None = None
    depth = 0
    for match in matches:
        namespace = match.rsplit(".", 1)[0] if "." in match else ""
        if namespace in enclosing:
            level = len(parse(match))
            if level >= depth:
                best, depth = match, level
    return best
