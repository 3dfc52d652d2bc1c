"""Which pending steps may start: dependencies, the run's cap on running
steps, and each enclosing forEach loop's cap on running iterations.

Pure: it reads steps (anything with ``runtime_id``, ``depends_on`` and
``limits``, as agents/expansion.py's RuntimeStep and the state machine's
StepState have them) and their statuses, and answers with the ones to start.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol, TypeVar

TERMINAL = frozenset({"completed", "failed", "skipped", "cancelled"})
# A dependency in one of these lets its dependents start: a step skipped for
# its condition (zenflow's rule); a failure policy's skip reaches every
# dependent of the failed step at once, so none waits on such a one.
DONE = frozenset({"completed", "skipped"})


class Schedulable(Protocol):
    @property
    def runtime_id(self) -> str: ...
    @property
    def depends_on(self) -> tuple[str, ...]: ...
    @property
    def limits(self) -> tuple[tuple[str, int], ...]: ...


S = TypeVar("S", bound=Schedulable)


def ready(
    steps: Sequence[S],
    status: Mapping[str, str],
    *,
    max_running: int,
    among: Collection[str] | None = None,
    order: Callable[[list[S]], list[S]] | None = None,
) -> list[S]:
    """The pending steps that may start now, in order.

    ``status`` maps runtime ids to step statuses (missing means pending) and
    holds ``completed`` for each repeat-until loop that is done. A step may
    start when every dependency completed (or was skipped: ``DONE``), fewer than ``max_running`` steps
    run, and in each enclosing forEach loop its iteration is already under way
    or fewer than the loop's ``max_concurrency`` iterations are.

    ``among``: consider only these runtime ids for starting (the others still
    count as running, or as holding an iteration open). ``order``: puts the
    ready steps in the order they start in (``scheduled``), before the caps.
    """

    def state(runtime_id: str) -> str:
        return status.get(runtime_id, "pending")

    room = max_running - sum(1 for step in steps if state(step.runtime_id) == "running")
    candidates = [
        step
        for step in steps
        if (among is None or step.runtime_id in among)
        and state(step.runtime_id) == "pending"
        and all(state(dep) in DONE for dep in step.depends_on)
    ]
    if room <= 0 or not candidates:
        return []
    if order is not None:
        candidates = order(candidates)
    if not any(step.limits for step in candidates):
        # No forEach loop's cap applies to any of them, only the run's: no
        # need to count every loop's open iterations (a report waiting for
        # a 500-iteration loop is asked after each iteration ends).
        return candidates[:room]
    return _within_loop_caps(steps, state, candidates, room)


def _within_loop_caps(steps: Sequence[S], state: Callable[[str], str], candidates: list[S], room: int) -> list[S]:
    """The ``candidates`` (ready but for caps) that may start, in order: at
    most ``room``, and in each enclosing forEach loop only while fewer than
    its cap of iterations are under way (or the step's own iteration is)."""
    # Each step's iteration keys, worked out once: a capped loop decides on
    # every step of its run after each step ends.
    keys_of = {step.runtime_id: iteration_keys(step) for step in steps if step.limits}
    members: dict[str, list[str]] = {}
    for runtime_id, keys in keys_of.items():
        for key in keys:
            members.setdefault(key, []).append(runtime_id)
    active: set[str] = {
        key
        for key, runtime_ids in members.items()
        if any(state(r) != "pending" for r in runtime_ids) and not all(state(r) in TERMINAL for r in runtime_ids)
    }
    # Active iterations per forEach loop, kept as iterations start: counting
    # them anew for every candidate would make a fan-out quadratic in its steps.
    active_in = Counter(_group_of(key) for key in active)
    chosen: list[S] = []
    for step in candidates:
        if room <= 0:
            break
        keys = keys_of.get(step.runtime_id, [])
        caps = dict(step.limits)
        if any(key not in active and active_in[group] >= caps[group] for key, group in zip(keys, caps, strict=True)):
            continue
        chosen.append(step)
        for key in keys:
            if key not in active:
                active.add(key)
                active_in[_group_of(key)] += 1
        room -= 1
    return chosen


def iteration_keys(step: Schedulable) -> list[str]:
    """The forEach iteration namespaces the step runs in, outermost first:
    ``deploy[1]`` for ``deploy[1].ship``."""
    return _keys(step.runtime_id, step.limits)


def past_cap(runtime_id: str, limits: Sequence[tuple[str, int]]) -> bool:
    """Whether step ``runtime_id`` (its forEach ``limits``) is in an
    iteration numbered at or past its loop's cap, ``deploy[5]`` under a cap
    of 5: that loop has more iterations than its cap, which holds some back
    while others run."""
    keys = _keys(runtime_id, limits)
    return any(int(key[key.rindex("[") + 1 : -1]) >= cap for key, (_, cap) in zip(keys, limits, strict=True))


def _keys(runtime_id: str, limits: Sequence[tuple[str, int]]) -> list[str]:
    keys = []
    for group, _cap in limits:
        rest = runtime_id[len(group) :]
        keys.append(group + rest[: rest.index("]") + 1])
    return keys


def _group_of(key: str) -> str:
    return key[: key.rindex("[")]


def scheduled(candidates: list[S], scheduler: str, agent_of: Callable[[S], str], busy: Counter[str]) -> list[S]:
    """The ready ``candidates`` in the order zenflow's ``scheduler`` starts
    them: ``dependency-first`` as they are (the workflow's order);
    ``round-robin`` one of each agent in turn (agents in the order they first
    appear, each agent's steps in their order); ``least-busy`` the steps of
    agents with fewer running steps (``busy``) first, in their order
    otherwise."""
    if scheduler == "round-robin":
        buckets: dict[str, list[S]] = {}
        for step in candidates:
            buckets.setdefault(agent_of(step), []).append(step)
        rounds = max((len(bucket) for bucket in buckets.values()), default=0)
        return [bucket[i] for i in range(rounds) for bucket in buckets.values() if i < len(bucket)]
    if scheduler == "least-busy":
        return sorted(candidates, key=lambda step: busy[agent_of(step)])
    return candidates
