"""Every write that changes a run's state, and the events that record it.

``do_*`` functions write; ``check_*`` validate input and raise with a clear
message; ``access_*`` fetch with a permission check. Views, commands, tasks
and consumers call these and stay thin. Each ``do_*`` runs in a transaction,
and its events commit with it (runs/stores.py broadcasts them after commit).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from string import Template

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.llm import ProviderError, build_provider
from agents.router import COORDINATOR, DropReason, MessageRouter, RouterMessage
from agents.runner import (
    AgentTurn,
    TurnResult,
    apply_completion,
    build_request,
    coordinator_system_prompt,
    new_step_transcript,
    step_prompt,
)
from agents.spec import AgentSpec, WorkflowSpec, parse_workflow
from agents.tools import default_registry
from runs.models import Run, Step, ToolCall, Workflow
from runs.stores import DjangoEventSink, DjangoMailboxStore, request_coordinator_wake

log = logging.getLogger(__name__)

REGISTRY = default_registry()
# A coordinator wake may call tools and look at their results this many times.
MAX_COORDINATOR_ROUNDS = 8


class InputError(ValueError):
    """Run inputs that do not match the workflow's declared inputs."""


# -- the catalog ----------------------------------------------------------------


def do_register_workflow(yaml_text: str, source: str = "<string>") -> tuple[Workflow, bool]:
    """Validate a workflow and store it as the next version of its name.

    Registering text identical to the latest version changes nothing.
    Raises agents.spec.WorkflowValidationError with every problem found.
    """
    spec = parse_workflow(yaml_text, source, known_tools=REGISTRY.names())
    with transaction.atomic():
        latest = Workflow.objects.filter(name=spec.name).order_by("-version").first()
        if latest and latest.yaml_text == yaml_text:
            return latest, False
        version = max(spec.version, latest.version + 1 if latest else 1)
        workflow = Workflow.objects.create(
            name=spec.name,
            version=version,
            description=spec.description,
            source=source,
            yaml_text=yaml_text,
            spec=spec.to_data(),
        )
    return workflow, True


def do_load_catalog(directory: Path) -> list[tuple[Workflow, bool]]:
    """Register every ``*.yaml`` in ``directory`` (sorted, for stable versions)."""
    return [do_register_workflow(path.read_text(), str(path)) for path in sorted(directory.glob("*.yaml"))]


_SPECS: dict[tuple[int, object], WorkflowSpec] = {}


def workflow_spec(workflow: Workflow) -> WorkflowSpec:
    """The parsed spec of a stored version. Versions never change, so parsed
    specs are kept (keyed with the creation time too: a test database that
    is flushed hands out the same primary keys again)."""
    key = (workflow.pk, workflow.created)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = WorkflowSpec.model_validate(workflow.spec)
    return spec


def check_inputs(spec: WorkflowSpec, raw: Mapping[str, object]) -> dict[str, object]:
    """Turn raw inputs (strings from a CLI or form, or JSON values) into the
    workflow's declared inputs, with defaults. Every problem is reported."""
    problems: list[str] = []
    values: dict[str, object] = {}
    for name in raw:
        if name not in spec.inputs:
            known = ", ".join(sorted(spec.inputs)) or "none"
            problems.append(f"unknown input {name!r} (this workflow takes: {known})")
    for name, declared in spec.inputs.items():
        if name not in raw:
            if declared.required:
                problems.append(f"missing required input {name!r}")
            elif declared.default is not None:
                values[name] = declared.default
            continue
        try:
            values[name] = _coerce(raw[name], declared.type)
        except ValueError:
            problems.append(f"input {name!r} must be {declared.type}, got {raw[name]!r}")
    if problems:
        raise InputError("; ".join(problems))
    return values


def _coerce(value: object, type_: str) -> object:
    if type_ == "string":
        return str(value)
    if type_ == "integer":
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    if type_ == "number":
        if isinstance(value, bool):
            raise ValueError
        return float(str(value))
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in {"true", "yes", "1"}:
        return True
    if lowered in {"false", "no", "0"}:
        return False
    raise ValueError


# -- starting and ending runs -------------------------------------------------------


def do_create_run(workflow: Workflow, inputs: Mapping[str, object], *, user=None, command: str = "") -> Run:
    """Create a pending run and have a worker start it after commit."""
    from runs import tasks

    values = check_inputs(workflow_spec(workflow), inputs)
    with transaction.atomic():
        run = Run.objects.create(workflow=workflow, inputs=values, created_by=user, command=command)
        transaction.on_commit(lambda: tasks.start_run.delay(run.pk))
    return run


def do_start_run(run_id: int) -> None:
    """Expand the workflow into steps, register their mailboxes, start the
    steps that are ready. A second delivery of the same task does nothing."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, status=Run.Status.PENDING).update(
            status=Run.Status.RUNNING, started=timezone.now()
        ):
            return
        run = Run.objects.select_related("workflow").get(pk=run_id)
        spec = workflow_spec(run.workflow)
        Step.objects.create(
            run=run,
            step_id=COORDINATOR,
            kind=Step.Kind.COORDINATOR,
            agent=COORDINATOR,
            status=Step.Status.RUNNING,
            started=timezone.now(),
        )
        for position, step in enumerate(spec.steps, start=1):
            Step.objects.create(
                run=run,
                step_id=step.id,
                agent=step.agent,
                position=position,
                depends_on=list(step.depends_on),
                instructions=step.instructions,
            )
        DjangoEventSink(run.pk).emit(
            RuntimeEvent(
                "workflow_start",
                "",
                {
                    "workflow": spec.name,
                    "version": run.workflow.version,
                    "inputs": run.inputs,
                    "steps": [step.id for step in spec.steps],
                },
            )
        )
        schedule(run.pk)


def schedule(run_id: int) -> None:
    """Start every pending step whose dependencies completed.

    Dependents wait while the coordinator has messages to route, so that a
    message a finished step sent for them is in their inbox before their
    first turn.
    """
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("workflow").get(pk=run_id)
        if run.status != Run.Status.RUNNING or run.coordinator_busy or _coordinator_has_mail(run):
            return
        steps = list(run.steps.filter(kind=Step.Kind.STEP))
        status = {step.step_id: step.status for step in steps}
        running = sum(1 for step in steps if step.status == Step.Status.RUNNING)
        room = workflow_spec(run.workflow).options.max_concurrency - running
        for step in steps:
            if room <= 0:
                break
            if step.status == Step.Status.PENDING and all(
                status.get(dep) == Step.Status.COMPLETED for dep in step.depends_on
            ):
                _start_step(run, step)
                room -= 1
        if all(step.is_terminal for step in steps):
            request_coordinator_wake(run.pk)


def _start_step(run: Run, step: Step) -> None:
    from runs import tasks

    if not Step.objects.filter(pk=step.pk, status=Step.Status.PENDING).update(
        status=Step.Status.RUNNING, started=timezone.now()
    ):
        return
    DjangoEventSink(run.pk).emit(RuntimeEvent("step_start", step.step_id, {"agent": step.agent}))
    transaction.on_commit(lambda: tasks.run_step_turn.delay(step.pk, 1))


def _coordinator_has_mail(run: Run) -> bool:
    return run.messages.filter(recipient=COORDINATOR, drained=None, drop_reason="").exists()


def do_finish_run(run_id: int) -> None:
    """End a run whose steps are all terminal: workflow_end is always last."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        steps = run.steps.filter(kind=Step.Kind.STEP)
        failed = steps.filter(status=Step.Status.FAILED).values_list("step_id", "error")
        run.status = Run.Status.FAILED if failed else Run.Status.COMPLETED
        if failed and not run.error:
            run.error = "\n".join(f"step {step_id} failed: {error}" for step_id, error in failed)
        _end_run(run)


def do_fail_run(run_id: int, error: str) -> None:
    """Stop a run that cannot go on: unfinished steps are cancelled."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return
        sink = DjangoEventSink(run.pk)
        sink.emit(RuntimeEvent("error", "", {"error": error}))
        _stop_unfinished_steps(run, DropReason.TARGET_TERMINAL)
        run.status = Run.Status.FAILED
        run.error = error
        _end_run(run)


def do_cancel_run(run_id: int, reason: str = "cancelled") -> bool:
    """Cancel a run: unfinished steps stop at their next turn boundary, every
    message still unread and every later send drops as workflow-cancelled."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal:
            return False
        run.status = Run.Status.CANCELLED
        run.error = reason
        run.save(update_fields=["status", "error"])
        _stop_unfinished_steps(run, DropReason.WORKFLOW_CANCELLED)
        _end_run(run)
    return True


def _stop_unfinished_steps(run: Run, reason: DropReason) -> None:
    router = _router(run.pk)
    for step in run.steps.exclude(status__in=Step.TERMINAL).exclude(kind=Step.Kind.COORDINATOR):
        step.status = Step.Status.CANCELLED
        step.finished = timezone.now()
        step.save(update_fields=["status", "finished"])
        router.close(step.step_id, reason)


_COORDINATOR_END = {
    Run.Status.COMPLETED: Step.Status.COMPLETED,
    Run.Status.FAILED: Step.Status.FAILED,
    Run.Status.CANCELLED: Step.Status.CANCELLED,
}


def _end_run(run: Run) -> None:
    run.finished = timezone.now()
    run.coordinator_busy = False
    # Never a full save: the counters on this row moved while we emitted events.
    run.save(update_fields=["status", "error", "finished", "coordinator_busy"])
    # The coordinator lives as long as its run and ends the way the run did.
    run.steps.filter(kind=Step.Kind.COORDINATOR).update(status=_COORDINATOR_END[run.status], finished=run.finished)
    _router(run.pk).close(COORDINATOR, DropReason.TARGET_TERMINAL)
    DjangoEventSink(run.pk).emit(
        RuntimeEvent(
            "workflow_end",
            "",
            {"status": run.status, "result": run.result, "error": run.error},
        )
    )


# -- step turns ------------------------------------------------------------------------


def do_step_turn(step_pk: int, turn: int) -> None:
    """Take turn number ``turn`` of a step: ask its model, then record the
    answer in one transaction. A stale or repeated task does nothing."""
    step = Step.objects.select_related("run__workflow").get(pk=step_pk)
    run = step.run
    if run.status != Run.Status.RUNNING or step.status != Step.Status.RUNNING or step.turns != turn - 1:
        return
    spec = workflow_spec(run.workflow)
    agent = spec.agents[step.agent]
    if turn > spec.options.max_turns:
        do_fail_step(step.pk, f"step {step.step_id} did not finish within maxTurns ({spec.options.max_turns})")
        return
    store = DjangoMailboxStore(run.pk)
    inbox = store.unread(step.step_id)
    variables = _variables(run, step, inbox)
    if not step.transcript:
        instructions = Template(step.instructions).safe_substitute(variables)
        step.transcript = new_step_transcript(step.step_id, agent, step_prompt(instructions, _dependency_outputs(step)))
    agent_turn = AgentTurn(
        run_id=str(run.pk),
        step_id=step.step_id,
        agent_name=step.agent,
        agent=agent,
        role="step",
        transcript=step.transcript,
        variables=variables,
    )
    tools = REGISTRY.for_role("step", agent.tools)
    request = build_request(agent_turn, tools, inbox)
    try:
        completion = build_provider(agent.provider, model=agent.model, script=agent.script).complete(request)
    except ProviderError as exc:
        do_fail_step(step.pk, str(exc))
        return
    with transaction.atomic():
        # Claim the turn: if another worker recorded it first, this one yields.
        if not Step.objects.filter(pk=step.pk, status=Step.Status.RUNNING, turns=turn - 1).update(turns=turn):
            return
        result = apply_completion(
            agent_turn,
            request,
            completion,
            inbox,
            router=_router(run.pk),
            sink=DjangoEventSink(run.pk),
            registry=REGISTRY,
            tools=tools,
        )
        _save_turn(step, result)
        if result.status == "continue":
            from runs import tasks

            transaction.on_commit(lambda: tasks.run_step_turn.delay(step.pk, turn + 1))
        else:
            _complete_step(step, result.output)


def _dependency_outputs(step: Step) -> dict[str, str]:
    outputs = dict(
        Step.objects.filter(run_id=step.run_id, step_id__in=step.depends_on).values_list("step_id", "output")
    )
    return {dep: outputs.get(dep, "") for dep in step.depends_on}


def _variables(run: Run, step: Step, inbox: list[RouterMessage]) -> dict[str, str]:
    variables = {name: str(value) for name, value in run.inputs.items()}
    variables["step"] = step.step_id
    variables["inbox"] = inbox[-1].content if inbox else ""
    return variables


def _save_turn(step: Step, result: TurnResult) -> None:
    step.transcript = result.transcript
    step.prompt_tokens = F("prompt_tokens") + result.prompt_tokens
    step.completion_tokens = F("completion_tokens") + result.completion_tokens
    step.save(update_fields=["transcript", "prompt_tokens", "completion_tokens"])
    step.refresh_from_db(fields=["prompt_tokens", "completion_tokens", "turns"])
    ToolCall.objects.bulk_create(
        ToolCall(
            run_id=step.run_id,
            step=step,
            tool_call_id=call.tool_call_id,
            name=call.name,
            arguments=call.arguments,
            result=call.result,
            ok=call.ok,
            duration_ms=call.duration_ms,
        )
        for call in result.tool_calls
    )


def _complete_step(step: Step, output: str) -> None:
    Step.objects.filter(pk=step.pk).update(status=Step.Status.COMPLETED, output=output, finished=timezone.now())
    DjangoEventSink(step.run_id).emit(
        RuntimeEvent("step_end", step.step_id, {"status": Step.Status.COMPLETED, "output": output[:2000]})
    )
    _router(step.run_id).close(step.step_id)
    transaction.on_commit(lambda: schedule(step.run_id))


def do_fail_step(step_pk: int, error: str) -> None:
    """Record why a step failed; its dependents are skipped (cascade)."""
    with transaction.atomic():
        step = Step.objects.select_for_update().get(pk=step_pk)
        if step.is_terminal:
            return
        step.status = Step.Status.FAILED
        step.error = error
        step.finished = timezone.now()
        step.save(update_fields=["status", "error", "finished"])
        sink = DjangoEventSink(step.run_id)
        sink.emit(RuntimeEvent("error", step.step_id, {"error": error}))
        _router(step.run_id).close(step.step_id)
        _skip_dependents(step, sink)
        transaction.on_commit(lambda: schedule(step.run_id))


def _skip_dependents(failed: Step, sink: DjangoEventSink) -> None:
    steps = {s.step_id: s for s in Step.objects.filter(run_id=failed.run_id, kind=Step.Kind.STEP)}
    blocked = {failed.step_id}
    changed = True
    while changed:
        changed = False
        for step in steps.values():
            if step.status == Step.Status.PENDING and blocked & set(step.depends_on):
                step.status = Step.Status.SKIPPED
                step.finished = timezone.now()
                step.save(update_fields=["status", "finished"])
                sink.emit(RuntimeEvent("step_skipped", step.step_id, {"reason": f"dependency {failed.step_id} failed"}))
                _router(failed.run_id).close(step.step_id)
                blocked.add(step.step_id)
                changed = True


# -- the coordinator ---------------------------------------------------------------


def do_coordinator_wake(run_id: int) -> None:
    """Let the coordinator handle its inbox, or finish the run once every
    step is done. At most one wake runs per run; a wake asked for while one
    runs is handled by that one before it goes idle."""
    if not Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, coordinator_busy=False).update(
        coordinator_busy=True
    ):
        return
    try:
        while True:
            run = Run.objects.select_related("workflow").get(pk=run_id)
            if run.status != Run.Status.RUNNING:
                return
            seen = run.wake_requests
            inbox = DjangoMailboxStore(run_id).unread(COORDINATOR)
            steps = list(run.steps.filter(kind=Step.Kind.STEP))
            if inbox:
                _coordinator_rounds(run, "messages", inbox, steps)
            elif all(step.is_terminal for step in steps):
                _coordinator_rounds(run, "finish", [], steps)
                do_finish_run(run_id)
                return
            if Run.objects.filter(pk=run_id, wake_requests=seen).update(coordinator_busy=False):
                schedule(run_id)
                return
    except ProviderError as exc:
        do_fail_run(run_id, f"coordinator: {exc}")
    except Exception as exc:
        log.exception("coordinator wake of run %s failed", run_id)
        do_fail_run(run_id, f"coordinator: internal error: {type(exc).__name__}: {exc}")


def _coordinator_rounds(run: Run, reason: str, inbox: list[RouterMessage], steps: list[Step]) -> None:
    spec = workflow_spec(run.workflow)
    coordinator = run.steps.get(step_id=COORDINATOR)
    agent = spec.agents.get(COORDINATOR) or AgentSpec()
    sink = DjangoEventSink(run.pk)
    with transaction.atomic():
        Step.objects.filter(pk=coordinator.pk).update(turns=F("turns") + 1)
        coordinator.refresh_from_db(fields=["turns"])
        sink.emit(
            RuntimeEvent(
                "agent_wake", COORDINATOR, {"reason": reason, "cycle": coordinator.turns, "messages": len(inbox)}
            )
        )
    transcript = coordinator.transcript or [
        {
            "role": "system",
            "content": coordinator_system_prompt(
                spec.name, {s.step_id: f"agent {s.agent}; {s.instructions.strip()[:200]}" for s in steps}
            ),
        }
    ]
    outputs = {s.step_id: s.output if s.status == Step.Status.COMPLETED else f"({s.status}) {s.error}" for s in steps}
    extra = ""
    if reason == "finish":
        extra = (
            "Every step has finished. Their results:\n"
            + "\n".join(f"- {step_id}: {text[:2000]}" for step_id, text in outputs.items())
            + "\nCall finalize(summary) with the run's result."
        )
    turn = AgentTurn(
        run_id=str(run.pk),
        step_id=COORDINATOR,
        agent_name=COORDINATOR,
        agent=agent,
        role="coordinator",
        transcript=transcript,
        variables={
            "wake_reason": reason,
            "inbox_json": json.dumps([{"from": m.sender, "content": m.content, "type": str(m.type)} for m in inbox]),
            "outputs_json": json.dumps(outputs),
        },
    )
    tools = REGISTRY.for_role("coordinator", agent.tools)
    provider = build_provider(agent.provider, model=agent.model, script=agent.script)
    for round_no in range(MAX_COORDINATOR_ROUNDS):
        shown = inbox if round_no == 0 else []
        request = build_request(turn, tools, shown, extra if round_no == 0 else "")
        completion = provider.complete(request)
        with transaction.atomic():
            result = apply_completion(
                turn, request, completion, shown, router=_router(run.pk), sink=sink, registry=REGISTRY, tools=tools
            )
            _save_turn(coordinator, result)
            if result.finalized is not None:
                Run.objects.filter(pk=run.pk).update(result=result.finalized)
        turn.transcript = result.transcript
        if result.status == "completed":
            break
    with transaction.atomic():
        sink.emit(RuntimeEvent("agent_idle", COORDINATOR, {"cycle": coordinator.turns}))


def _router(run_id: int) -> MessageRouter:
    return MessageRouter(DjangoMailboxStore(run_id), DjangoEventSink(run_id))


# -- access ---------------------------------------------------------------------------


def visible_runs(user):
    """The runs ``user`` may see: staff see all, others their own."""
    runs = Run.objects.select_related("workflow", "created_by")
    return runs if user.is_staff else runs.filter(created_by=user)


def access_run(user, run_id: int) -> Run:
    """The run, if ``user`` may see it; Run.DoesNotExist otherwise (so a
    stranger cannot tell a hidden run from a missing one)."""
    if not user.is_authenticated:
        raise Run.DoesNotExist
    return visible_runs(user).get(pk=run_id)
