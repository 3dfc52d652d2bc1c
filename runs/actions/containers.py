"""Containers at run time: the Step rows a workflow expands into, and where
a step sits in its repeat-until loop. The end of each iteration (done,
judged, or the next one) is in runs/actions/step_ends.py.

agents/expansion.py and agents/repeat_loops.py decide; the actions store
what they decide.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Max
from django.utils import timezone

from agents import ids
from agents.expansion import RuntimeStep
from agents.router import COORDINATOR
from runs.models import Run, Step
from runs.store.sql import store


def create_steps(run: Run, runtime_steps: Iterable[RuntimeStep], *, first: bool = False) -> list[Step]:
    """Store runtime steps as Step rows (after the run's existing ones), and a
    row for each repeat-until loop they are the first to enter, in one INSERT
    (a forEach of 100 items is 100 rows). ``first``: the run's first steps,
    created when it starts, after its coordinator (at position 0, created
    with them, running)."""
    created: list[Step] = []
    if first:
        position, existing = 1, {COORDINATOR}
        created.append(
            Step(
                run=run,
                step_id=COORDINATOR,
                kind=Step.Kind.COORDINATOR,
                agent=COORDINATOR,
                status=Step.Status.RUNNING,
                started=timezone.now(),
            )
        )
    else:
        position = (run.steps.aggregate(last=Max("position"))["last"] or 0) + 1
        existing = set(run.steps.values_list("step_id", flat=True))
    for runtime in runtime_steps:
        loop_id = repeat_loop_of(runtime.runtime_id)
        if loop_id and loop_id not in existing:
            existing.add(loop_id)
            created.append(
                Step(
                    run=run,
                    step_id=loop_id,
                    kind=Step.Kind.LOOP,
                    agent="",
                    position=position,
                    status=Step.Status.RUNNING,
                    started=timezone.now(),
                    container=ids.container_of(loop_id) or "",
                )
            )
            position += 1
        created.append(
            Step(
                run=run,
                step_id=runtime.runtime_id,
                agent=runtime.agent,
                model=runtime.model,
                position=position,
                depends_on=list(runtime.depends_on),
                instructions=runtime.instructions,
                container=runtime.container,
                iteration=runtime.iteration,
                limits=[list(limit) for limit in runtime.limits],
                variables=dict(runtime.variables),
            )
        )
        existing.add(runtime.runtime_id)
        position += 1
    store().insert_many(created)
    return created


def repeat_loop_of(runtime_id: str) -> str | None:
    """The runtime id of the innermost repeat-until loop ``runtime_id`` runs in."""
    parts = ids.parse(runtime_id)
    for n in range(len(parts) - 1, -1, -1):
        if parts[n].kind == "repeat":
            return ids.format_id(parts[:n] + [parts[n]._replace(kind="step", index=None)])
    return None


def iteration_prefix(runtime_id: str, loop_id: str) -> str:
    rest = runtime_id[len(loop_id) + 1 :]
    return f"{loop_id}.{rest.split('.', 1)[0]}."


def iteration_of(prefix: str) -> int:
    return int(prefix.rstrip(".").rsplit(".", 1)[1])
