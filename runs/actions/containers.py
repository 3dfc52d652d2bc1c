"""Containers at run time: the Step rows a workflow expands into, and the
end of each repeat-until iteration (done, judged, or the next iteration).

agents/expansion.py and agents/repeat_loops.py decide; this module stores what it decides and emits
the events: loop_iteration when an iteration starts, loop_end when a loop
is done.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from agents import ids, repeat_loops
from agents.events import Event as RuntimeEvent
from agents.expansion import RuntimeStep
from agents.llm import ProviderError
from agents.llm.base import CompletionRequest
from runs.actions.catalog import workflow_spec
from runs.actions.common import provider_for
from runs.actions.model_calls import model_call
from runs.models import Run, Step
from runs.store import sql
from runs.store.events import DjangoEventSink
from runs.store.sql import lock_run


def create_steps(run: Run, runtime_steps: Iterable[RuntimeStep]) -> list[Step]:
    """Store runtime steps as Step rows (after the run's existing ones), and a
    row for each repeat-until loop they are the first to enter, in one INSERT
    (a forEach of 100 items is 100 rows)."""
    position = (run.steps.aggregate(last=Max("position"))["last"] or 0) + 1
    existing = set(run.steps.values_list("step_id", flat=True))
    created: list[Step] = []
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
    sql.insert_many(created)
    return created


def repeat_loop_of(runtime_id: str) -> str | None:
    """The runtime id of the innermost repeat-until loop ``runtime_id`` runs in."""
    parts = ids.parse(runtime_id)
    for n in range(len(parts) - 1, -1, -1):
        if parts[n].kind == "repeat":
            return ids.format_id(parts[:n] + [parts[n]._replace(kind="step", index=None)])
    return None


def after_step_terminal(step: Step) -> bool:
    """If ``step`` ended the iteration of a repeat-until loop it ran in,
    decide what follows, and say so (True). Call inside the transaction
    that ended it."""
    loop_id = repeat_loop_of(step.step_id)
    if loop_id is None:
        return False
    run = Run.objects.select_related("workflow").get(pk=step.run_id)
    prefix = _iteration_prefix(step.step_id, loop_id)
    members = list(run.steps.filter(step_id__startswith=prefix).exclude(kind=Step.Kind.LOOP))
    if not all(member.is_terminal for member in members):
        return False
    loop = run.steps.select_for_update().get(step_id=loop_id)
    if loop.is_terminal:
        return False
    if any(member.status != Step.Status.COMPLETED for member in members):
        _end_loop(run, loop, Step.Status.FAILED, f"iteration {_iteration(prefix)} did not complete")
        return True
    decide(run, loop, _iteration(prefix))
    return True


def decide(run: Run, loop: Step, iteration: int, verdict: bool | None = None) -> None:
    outputs = dict(run.steps.filter(step_id__startswith=f"{loop.step_id}.").values_list("step_id", "output"))
    decision = repeat_loops.next_iteration(
        workflow_spec(run.workflow), loop.step_id, iteration, outputs, inputs=run.inputs, verdict=verdict
    )
    sink = DjangoEventSink(run.pk)
    if decision.action == "done":
        _end_loop(run, loop, Step.Status.COMPLETED, decision.reason)
    elif decision.action == "judge":
        from runs import tasks

        sink.emit(RuntimeEvent("loop_judge", loop.step_id, {"iteration": iteration, "agent": decision.agent}))
        transaction.on_commit(lambda: tasks.judge_loop.delay(loop.pk, iteration), robust=True)
    else:
        from runs.actions.steps import schedule_after_commit

        create_steps(run, decision.steps)
        schedule_after_commit(run.pk)
        sink.emit(
            RuntimeEvent(
                "loop_iteration",
                loop.step_id,
                {"iteration": iteration + 1, "steps": [s.runtime_id for s in decision.steps]},
            )
        )


def do_judge_loop(loop_pk: int, iteration: int) -> None:
    """Ask a loop's untilAgent whether the iteration finished the loop."""
    loop = Step.objects.select_related("run__workflow").get(pk=loop_pk)
    run = loop.run
    if loop.is_terminal or run.is_terminal:
        return
    spec = workflow_spec(run.workflow)
    outputs = dict(run.steps.filter(step_id__startswith=f"{loop.step_id}.").values_list("step_id", "output"))
    pending = repeat_loops.next_iteration(spec, loop.step_id, iteration, outputs, inputs=run.inputs)
    agent = spec.agents[pending.agent]
    request = CompletionRequest(
        agent=pending.agent,
        messages=[
            {"role": "system", "content": agent.system or "You judge whether a loop is done."},
            {"role": "user", "content": pending.prompt},
        ],
        model=agent.model,
        temperature=agent.temperature,
        variables={"iteration": str(iteration)},
    )
    try:
        with model_call(run.pk, loop.step_id) as hooks:
            answer = provider_for(agent).complete(request, **hooks).content or ""
    except ProviderError as exc:
        with transaction.atomic():
            lock_run(run.pk)
            _end_loop(run, Step.objects.select_for_update().get(pk=loop_pk), Step.Status.FAILED, f"judge: {exc}")
        return
    verdict = repeat_loops.judge_decision(answer)
    with transaction.atomic():
        lock_run(run.pk)
        loop = Step.objects.select_for_update().get(pk=loop_pk)
        if loop.is_terminal:
            return
        DjangoEventSink(run.pk).emit(
            RuntimeEvent(
                "loop_judged", loop.step_id, {"iteration": iteration, "done": verdict, "answer": answer[:2000]}
            )
        )
        decide(run, loop, iteration, verdict)


def _end_loop(run: Run, loop: Step, status: str, reason: str) -> None:
    from runs.actions.steps import apply_failure_policy, schedule_after_commit

    loop.status = status
    loop.finished = timezone.now()
    loop.output = reason if status == Step.Status.COMPLETED else ""
    loop.error = "" if status == Step.Status.COMPLETED else reason
    loop.save(update_fields=["status", "finished", "output", "error"])
    DjangoEventSink(run.pk).emit(RuntimeEvent("loop_end", loop.step_id, {"status": status, "reason": reason}))
    if status != Step.Status.COMPLETED:
        apply_failure_policy(loop, f"loop {loop.step_id} failed")
    # A loop inside another repeat-until loop ends that loop's iteration too.
    after_step_terminal(loop)
    schedule_after_commit(run.pk)


def _iteration_prefix(runtime_id: str, loop_id: str) -> str:
    rest = runtime_id[len(loop_id) + 1 :]
    return f"{loop_id}.{rest.split('.', 1)[0]}."


def _iteration(prefix: str) -> int:
    return int(prefix.rstrip(".").rsplit(".", 1)[1])
