"""Step turns: asking a step's model, recording its answer, and what follows
(another turn, a wake cycle for late messages, completion, failure, cancel),
plus one-turn resumes of completed steps."""

from __future__ import annotations

from datetime import timedelta
from string import Template

from django.db import transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from agents.core import machine
from agents.events import Event as RuntimeEvent
from agents.events import ListSink
from agents.llm import ProviderError
from agents.router import DoubleDrainError, DropReason, MessageRouter, MessageType, RouterMessage
from agents.runner import (
    AgentTurn,
    TurnResult,
    apply_completion,
    build_request,
    is_empty,
    new_step_transcript,
    run_side_effects,
    step_prompt,
)
from agents.spec import AgentSpec, WorkflowOptions, WorkflowSpec
from runs import leases
from runs.actions.approvals import lapse_pending
from runs.actions.budgets import do_enforce_budget, has_run_limits, run_deadline, timeout_breach
from runs.actions.catalog import workflow_spec
from runs.actions.children import cancel_step_children_after_commit
from runs.actions.common import REGISTRY, Limits, provider_for, router_for, save_turn, warning_cycle
from runs.actions.containers import after_step_terminal, repeat_loop_of
from runs.actions.model_calls import model_call
from runs.actions.scheduling import run_state, schedule
from runs.actions.tooling import step_tools, tool_env
from runs.journal import DjangoToolJournal
from runs.models import Run, Step, ToolCall
from runs.store import last_turn, sql
from runs.store.events import DjangoEventSink, broadcast
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import lock_run
from runs.store.unit_of_work import UnitOfWork
from runs.store.wakes import stop_waiting_after_commit


def do_step_turn(step_pk: int, turn: int) -> int | None:
    """Take turn number ``turn`` of a step: ask its model, then record the
    answer in one transaction. A stale or repeated task does nothing.

    Returns the step whose first turn this worker is to take next, if the
    completion started exactly one (eager continuation: no broker hop
    between a chain's steps; see runs.actions.scheduling.schedule)."""
    # One worker per turn: a redelivered task, or a sweep racing a slow but
    # live worker, finds the lease taken (or the turn gone) and leaves.
    owner = leases.worker_identity()
    step = leases.claim_turn(step_pk, turn, owner)
    if step is None:
        return
    run = step.run
    spec = workflow_spec(run.workflow)
    agent = spec.agents[step.agent]
    # Most turns (a fan-out's every one) have no mail: the count came with the step.
    inbox = DjangoMailboxStore(run.pk).unread(step.step_id) if step.unread else []
    if any(message.type == MessageType.CANCEL for message in inbox):
        _cancel_step(step, inbox)
        return
    if turn > spec.options.max_turns:
        do_fail_step(step.pk, f"step {step.step_id} did not finish within maxTurns ({spec.options.max_turns})")
        return
    if _stopped_by_deadline(run, step, spec.options):
        return
    variables = _variables(run, step, inbox)
    if not step.transcript:
        instructions = Template(step.instructions).safe_substitute(variables)
        prompt = step_prompt(instructions, _dependency_outputs(step))
        step.transcript = new_step_transcript(step.step_id, agent, prompt)
    # The turn's writes: held, and written together when it is recorded.
    uow = UnitOfWork(run.pk)
    agent_turn = _agent_turn(run, step, agent, variables, uow)
    agent_turn.empty_answer_retries = spec.options.max_empty_answer_retries
    registry, tools = step_tools(spec, step)
    request = build_request(agent_turn, tools, inbox, deadline=turn_deadline(run, step, spec.options))
    journal = DjangoToolJournal(step.pk, owner)
    agent_turn.env.journal = journal
    # Service-backed calls become tasks of their own (runs/actions/tool_tasks.py).
    agent_turn.env.defer = spec.options.tool_execution == "tasks"
    try:
        with leases.renewing(step.pk, owner):
            with model_call(run.pk, step.step_id) as hooks:
                completion = provider_for(agent).complete(request, **hooks)
            # An answer that came back past a deadline is not acted on, nor
            # recorded (checked again below: its tools may have run long).
            late = _stopped_by_deadline(run, step, spec.options)
            if completion.tool_calls:
                # What is left under maxToolCalls decides whether any call runs.
                agent_turn.env.tool_call_cap = spec.options.max_tool_calls
                agent_turn.env.tool_calls_made = ToolCall.objects.filter(step=step, counted=True).count()
            if not late:
                # Files and commands run now, each result kept at once: if this
                # worker dies before the turn is recorded, the retry reuses them.
                run_side_effects(agent_turn, completion, registry=registry, tools=tools, journal=journal)
    except ProviderError as exc:
        # A call cut off by a deadline fails for the deadline's reason.
        if not _stopped_by_deadline(run, step, spec.options):
            do_fail_step(step.pk, str(exc))
        return
    if late or _stopped_by_deadline(run, step, spec.options):
        return
    # Built before the run's lock is taken: every step of the run waits for
    # that lock, so what does not need it stays out of it. (A step only
    # sends to the coordinator: the run's status, read before the model
    # answered, is never consulted.) It routes only inside the block whose
    # first UPDATE takes the run's lock: it need not take it again.
    router = router_for(run, uow=uow)
    recorded, follow = _last_turn_in_one_trip(
        step, turn, spec, agent_turn, request, completion, inbox, router, registry, tools
    )
    if recorded:
        return follow
    with transaction.atomic():
        # Record the turn, with the run's lock: if another worker recorded it
        # first (our lease had expired and the turn was handed on), this one yields.
        if not _record_turn(step, turn):
            return
        # The turn's events and messages go in together, in one statement on PostgreSQL.
        with uow:
            try:
                result = apply_completion(
                    agent_turn, request, completion, inbox, router=router, sink=uow.sink, registry=registry, tools=tools
                )
            except DoubleDrainError:
                # Another worker already delivered these messages: this turn is a
                # duplicate, and rolling it back keeps each message read once.
                transaction.set_rollback(True)
                return
            if result.status == "completed" and not result.tool_calls:
                # The usual last turn: stored, and with nothing unread the
                # step completed, in one statement that also reads what
                # scheduling needs after commit.
                tokens = (result.prompt_tokens, result.completion_tokens)
                unread, state = last_turn.save(step, result.transcript, tokens, _completion(result.output))
                enforce_budget_after_commit(run.pk, spec)
                if state is not None:
                    _completed_by_last_turn(step, result.output, uow, state)
                    return
            else:
                # A turn that continues queues the next (_next_turn below): marked with it.
                unread = save_turn(step, result, next_turn_queued=result.status == "continue")
                enforce_budget_after_commit(run.pk, spec)
            broken_policy = _tool_policy_breach(step, spec.options, result) if result.tool_calls else None
            if result.status == "failed" or broken_policy:
                uow.flush()  # the turn's events before the failure's, written at once
                do_fail_step(step.pk, result.error if result.status == "failed" else broken_policy)
            elif result.status == "waiting":
                # Tasks, a child run or a person answer its calls; the last
                # answer takes the next turn. A cancel that came while the
                # model answered would wait for that too: it is acted on now.
                if unread:
                    stop_waiting_after_commit(run.pk, step.step_id)
            elif result.status == "continue" or _wakes_for_late_messages(step, run, unread, uow.sink, router):
                _next_turn(step.pk, turn + 1)
            else:
                _complete_step(step, result.output, router)


def _record_turn(step: Step, turn: int) -> int:
    """Record turn ``turn`` of ``step`` under the run's lock (the turn's
    first statement): how many rows it changed (0: another worker recorded
    it). A queued mark left by a duplicate of this turn (a resume while it
    ran) goes: what follows the turn sets it again if it queues another."""
    values = {"turns": turn, "lease_owner": "", "lease_expires": None, "turn_queued": None}
    where, params = "id = %s AND status = %s AND turns = %s", [step.pk, Step.Status.RUNNING, turn - 1]
    return sql.update(Step, values, where, params, locking_run=step.run_id)


def _last_turn_in_one_trip(
    step, turn, spec, agent_turn, request, completion, inbox, router, registry, tools
) -> tuple[bool, int | None]:
    """Record the usual last turn (an answer, no tool call, no mail read, no
    repeat-until loop to decide next) in one round trip on PostgreSQL
    (runs/store/last_turn.py), and say whether it was, with the step this worker
    takes the first turn of next (see do_step_turn). False, having written
    nothing, when it does not apply or mail arrived meanwhile: the general
    path below takes the turn then."""
    if completion.tool_calls or inbox or not last_turn.applies() or repeat_loop_of(step.step_id) is not None:
        return False, None
    if is_empty(completion):
        return False, None  # not a last turn: the model gets a hint, or the step fails
    events = ListSink()
    # ``router`` routes nothing here: no mail to drain, no tool call.
    result = apply_completion(
        agent_turn, request, completion, inbox, router=router, sink=events, registry=registry, tools=tools
    )
    events.emit(_step_end(step, result.output))
    now = timezone.now()
    tokens = (result.prompt_tokens, result.completion_tokens)
    written = last_turn.write(
        step, turn, result.transcript, tokens, _completion(result.output), [(event, now) for event in events.events]
    )
    if written is None:
        return False, None
    last_seq, state = written
    broadcast(step.run_id, last_seq)
    # Committed already: these run now.
    enforce_budget_after_commit(step.run_id, spec)
    return True, schedule(step.run_id, state, step.step_id, eager=True)


def _agent_turn(
    run: Run, step: Step, agent: AgentSpec, variables: dict[str, str], uow: UnitOfWork | None = None
) -> AgentTurn:
    return AgentTurn(
        run_id=str(run.pk),
        step_id=step.step_id,
        agent_name=step.agent,
        agent=agent,
        role="step",
        transcript=step.transcript,
        variables=variables,
        env=tool_env(run, step, uow),
    )


def _tool_policy_breach(step: Step, options: WorkflowOptions, result: TurnResult) -> str | None:
    """Why the step must stop after this turn's tool calls, if it must: it
    asked for a call with none left under maxToolCalls, the run made too
    many, or too many turns in a row had every call fail.

    A turn asking for more calls than are left, with some left, ran none of
    them and got an error per call saying so (agents.runner): the model may
    ask for fewer. With none left there is nothing to ask for: the step
    fails, as it did when it passed the cap."""
    if result.call_cap_exhausted:
        return f"step {step.step_id} asked for more than {options.max_tool_calls} tool calls (maxToolCalls)"
    # Bookkeeping calls (messaging) do not count against the caps.
    if ToolCall.objects.filter(run_id=step.run_id, counted=True).count() > options.max_run_tool_calls:
        return f"the run made more than {options.max_run_tool_calls} tool calls (maxRunToolCalls)"
    cap = options.max_consecutive_tool_failures
    # Turns, not calls: five bad calls in one turn are one mistake the model
    # can fix at once. A model stuck on a failing call is stuck whatever the
    # tool: every call counts here, and a turn fails when none of its calls worked.
    finished = ToolCall.objects.filter(step=step).exclude(status__in=ToolCall.PENDING)
    turns = finished.values("turn_id").annotate(last=Max("id"), worked=Count("id", filter=Q(ok=True)))
    recent = list(turns.order_by("-last").values_list("worked", flat=True)[:cap])
    if len(recent) == cap and not any(recent):
        return f"step {step.step_id}'s tool calls all failed in its last {cap} turns (maxConsecutiveToolFailures)"
    return None


def enforce_budget_after_commit(run_id: int, spec: WorkflowSpec) -> None:
    if not has_run_limits(spec.options):
        return  # nothing to enforce: no query after every turn
    transaction.on_commit(lambda: do_enforce_budget(run_id))


def step_timeout_breach(step: Step, options: WorkflowOptions) -> str | None:
    """Why ``step`` is past options.stepTimeout, or None (no query).

    Counted from the step's start, like Temporal's start-to-close timeout:
    everything the step waits for counts (its tool tasks, a child run, a
    person's approval), as everything counts against the run's timeout."""
    if options.step_timeout is None or step.started is None:
        return None
    ran = (timezone.now() - step.started).total_seconds()
    if ran < options.step_timeout:
        return None
    return f"step {step.step_id} ran {ran:.1f}s, past options.stepTimeout ({options.step_timeout:g}s)"


def turn_deadline(run: Run, step: Step, options: WorkflowOptions) -> float | None:
    """The Unix time the run's or the step's timeout ends this turn, or None."""
    deadlines = [run_deadline(run, options)]
    if options.step_timeout is not None and step.started is not None:
        deadlines.append(step.started.timestamp() + options.step_timeout)
    return min((d for d in deadlines if d is not None), default=None)


def _stopped_by_deadline(run: Run, step: Step, options: WorkflowOptions) -> bool:
    """Fail the run if it is past options.timeout, else the step if it is
    past options.stepTimeout; True if either was."""
    reason = timeout_breach(run, options)
    if reason is not None:
        from runs.actions.lifecycle import do_fail_run

        do_fail_run(run.pk, reason)
        return True
    reason = step_timeout_breach(step, options)
    if reason is not None:
        do_fail_step(step.pk, reason)
        return True
    return False


def do_enforce_step_timeouts(run_id: int, options: WorkflowOptions) -> int:
    """Fail the run's steps that are past options.stepTimeout (the sweeper's
    check: a step can be stuck in a long model call, or wait for its tools);
    how many. A worker's turn that comes back later finds its step failed
    and records nothing."""
    if options.step_timeout is None:
        return 0
    cutoff = timezone.now() - timedelta(seconds=options.step_timeout)
    # Steps only: the coordinator lives as long as its run, and a loop as long as its iterations.
    late = Step.objects.filter(
        run_id=run_id, kind=Step.Kind.STEP, status=Step.Status.RUNNING, started__lt=cutoff
    ).order_by("position")
    failed = 0
    for step in late.only("pk", "step_id", "started"):
        reason = step_timeout_breach(step, options)
        if reason is not None and do_fail_step(step.pk, reason):
            failed += 1
    return failed


def _next_turn(step_pk: int, turn: int) -> None:
    """Queue turn ``turn`` after commit; the caller marked the step's row
    (``Step.turn_queued``) in the same transaction, with a write it makes anyway."""
    from runs import tasks

    transaction.on_commit(lambda: tasks.run_step_turn.delay(step_pk, turn), robust=True)


def _wakes_for_late_messages(step: Step, run: Run, pending: int, sink, router) -> bool:
    """A step that answered while ``pending`` messages were arriving for it
    takes another turn to read them (a wake cycle), within its wake-cycle cap
    and the hold timeout; past either, the messages drop with that reason."""
    if not pending:
        return False
    limits = Limits.of(run)
    now = timezone.now()
    held_since = step.held_since or now
    if step.wake_cycles >= limits.step_wake_cycles:
        router.close(step.step_id, DropReason.MAX_WAKE_CYCLES)
        return False
    if limits.hold_timeout > 0 and now - held_since > timedelta(seconds=limits.hold_timeout):
        router.close(step.step_id, DropReason.HOLD_TIMEOUT)
        return False
    cycle = step.wake_cycles + 1
    Step.objects.filter(pk=step.pk).update(wake_cycles=cycle, held_since=held_since, turn_queued=now)
    sink.emit(RuntimeEvent("agent_wake", step.step_id, {"reason": "messages", "cycle": cycle, "messages": pending}))
    if cycle == warning_cycle(limits.step_wake_cycles):
        sink.emit(
            RuntimeEvent("max_wake_cycles_warning", step.step_id, {"cycle": cycle, "max": limits.step_wake_cycles})
        )
    return True


def _dependency_outputs(step: Step) -> dict[str, str]:
    if not step.depends_on:
        return {}  # no query: a fan-out's steps depend on nothing
    outputs = dict(
        Step.objects.filter(run_id=step.run_id, step_id__in=step.depends_on).values_list("step_id", "output")
    )
    return {dep: outputs.get(dep, "") for dep in step.depends_on}


def _variables(run: Run, step: Step, inbox: list[RouterMessage]) -> dict[str, str]:
    variables = {name: str(value) for name, value in run.inputs.items()}
    variables.update(step.variables)
    variables["step"] = step.step_id
    variables["inbox"] = inbox[-1].content if inbox else ""
    return variables


def _completion(output: str) -> dict:
    return {"status": Step.Status.COMPLETED, "output": output, "finished": timezone.now()}


def _step_end(step: Step, output: str) -> RuntimeEvent:
    return RuntimeEvent("step_end", step.step_id, {"status": Step.Status.COMPLETED, "output": output[:2000]})


def _completed_by_last_turn(step: Step, output: str, uow: UnitOfWork, state: tuple) -> None:
    """What follows a completion written by last_turn.save, which read the
    run's scheduling ``state`` with it."""
    uow.sink.emit(_step_end(step, output))
    uow.flush()  # before a loop's events, written at once
    if after_step_terminal(step):
        schedule_after_commit(step.run_id)  # a loop moved on: the state is stale
    else:
        schedule_after_commit(step.run_id, state, finished=step.step_id)


def _complete_step(step: Step, output: str, router: MessageRouter) -> None:
    """End a step that answered while messages still waited for it (past its
    wake cycles or hold timeout, they were dropped): the usual completion,
    with nothing unread, is written by last_turn.save."""
    router.sink.emit(_step_end(step, output))
    sql.update(Step, _completion(output), "id = %s", [step.pk])
    router.close(step.step_id)
    if after_step_terminal(step):
        schedule_after_commit(step.run_id)  # a loop moved on
    else:
        schedule_after_commit(step.run_id, finished=step.step_id)


def schedule_after_commit(run_id: int, state: tuple | None = None, finished: str | None = None) -> None:
    """Schedule the run after commit; ``state``: its scheduling state, read
    under the run's lock before commit (last_turn.save);
    ``finished``: the step whose completion this follows (the state machine
    then decides on its dependents)."""
    transaction.on_commit(lambda: schedule(run_id, state, finished))


def do_fail_step(step_pk: int, error: str) -> bool:
    """Record why a step failed; its pending approvals lapse and its
    dependents follow the run's failure policy. False if it had ended already."""
    with transaction.atomic():
        lock_run(_run_of(step_pk))
        step = Step.objects.select_for_update().get(pk=step_pk)
        if step.is_terminal:
            return False
        step.status = Step.Status.FAILED
        step.error = error
        step.finished = timezone.now()
        step.save(update_fields=["status", "error", "finished"])
        DjangoEventSink(step.run_id).emit(RuntimeEvent("error", step.step_id, {"error": error}))
        _step_stopped(step, f"step {step.step_id} failed")
        router_for(step.run_id).close(step.step_id)
        apply_failure_policy(step, f"dependency {step.step_id} failed")
        after_step_terminal(step)
        schedule_after_commit(step.run_id)
    return True


def do_stop_waiting_step(run_id: int, step_id: str) -> None:
    """Cancel now a step that a cancel was forwarded to while it waits for
    a call's result (an approval, a tool task, a child run): no turn would
    read the cancel until the result came, and an approval could still run
    the call. A step mid-turn reads it at its next turn, as before."""
    with transaction.atomic():
        lock_run(run_id)
        step = Step.objects.filter(run_id=run_id, step_id=step_id, status=Step.Status.RUNNING).first()
        # Under the run's lock a step with pending calls is between turns:
        # its next turn is queued only once none is pending (deliver_result).
        if step is None or not ToolCall.objects.filter(step=step, status__in=ToolCall.PENDING).exists():
            return
        inbox = DjangoMailboxStore(run_id).unread(step_id)
        if any(message.type == MessageType.CANCEL for message in inbox):
            _cancel_step(step, inbox)


def _cancel_step(step: Step, inbox: list[RouterMessage]) -> None:
    """A forward of kind cancel stops the step at this turn boundary."""
    with transaction.atomic():
        lock_run(step.run_id)
        if not Step.objects.filter(pk=step.pk, status=Step.Status.RUNNING).update(
            status=Step.Status.CANCELLED, finished=timezone.now()
        ):
            return
        router = router_for(step.run_id)
        router.drain(step.step_id, only=inbox)
        cancel = next(m for m in inbox if m.type == MessageType.CANCEL)
        DjangoEventSink(step.run_id).emit(
            RuntimeEvent("step_cancelled", step.step_id, {"message_id": cancel.message_id, "reason": cancel.content})
        )
        step.status = Step.Status.CANCELLED
        _step_stopped(step, f"step {step.step_id} was cancelled: {cancel.content}")
        router.close(step.step_id)
        apply_failure_policy(step, f"dependency {step.step_id} was cancelled")
        after_step_terminal(step)
        schedule_after_commit(step.run_id)


def _step_stopped(step: Step, reason: str) -> None:
    """What a step that stopped unfinished leaves waiting goes with it: its
    pending approvals lapse (approved, a call would still run) and the
    child runs of its calls are cancelled. Call with the run's lock held,
    ``step.status`` set. (A run that ends does the same for all its work.)"""
    lapse_pending(step.run_id, reason, step_id=step.step_id)
    cancel_step_children_after_commit(step)


def apply_failure_policy(stopped: Step, reason: str) -> None:
    """onStepFailure, as the state machine decides it
    (agents.core.machine.stop_after_failure): cascade (dependents are
    cancelled), skip-dependents (dependents are skipped), abort (every
    unfinished step is cancelled and every later message to them drops as
    workflow-cancelled)."""
    run = Run.objects.select_related("workflow").get(pk=stopped.run_id)
    spec = workflow_spec(run.workflow)
    sink = DjangoEventSink(run.pk)
    router = router_for(run.pk)
    rows = list(Step.objects.filter(run=run, kind__in=[Step.Kind.STEP, Step.Kind.LOOP]).order_by("position"))
    state = run_state(run.status, rows, spec, machine.CoordinatorState())
    stop = machine.stop_after_failure(state, stopped.step_id)
    if stop.aborted:
        reason = f"run aborted: {reason.removeprefix('dependency ')}"
    by_id = {step.step_id: step for step in rows}
    affected = [by_id[step_id] for step_id in stop.step_ids]
    drop = DropReason.WORKFLOW_CANCELLED if stop.drop == "workflow_cancelled" else DropReason.TARGET_TERMINAL
    for step in affected:
        was_running = step.status == Step.Status.RUNNING
        step.status = stop.status
        step.finished = timezone.now()
        step.save(update_fields=["status", "finished"])
        sink.emit(RuntimeEvent("step_skipped", step.step_id, {"reason": reason, "status": stop.status}))
        if was_running:  # only a running step can wait for a decision or a child
            _step_stopped(step, f"step {step.step_id} was {stop.status}: {reason}")
        if step.kind == Step.Kind.STEP:
            router.close(step.step_id, drop)
    for step in affected:
        # A loop iteration that just lost its steps ends its loop.
        after_step_terminal(step)


def do_resume_turn(step_pk: int) -> None:
    """One more turn of a completed step, for the messages forwarded to it
    since. Its answer goes back to the coordinator as a resume_reply."""
    step = sql.step_for_turn(step_pk)
    if step is None:
        raise Step.DoesNotExist(f"step {step_pk} does not exist")
    run = step.run
    if not step.resuming:
        return
    if run.status != Run.Status.RUNNING:
        Step.objects.filter(pk=step.pk).update(resuming=False)
        return
    store = DjangoMailboxStore(run.pk)
    inbox = store.unread(step.step_id)
    agent = workflow_spec(run.workflow).agents[step.agent]
    agent_turn = _agent_turn(run, step, agent, _variables(run, step, inbox))
    agent_turn.empty_answer_retries = None  # one answer: an empty one replies "(no answer)"
    # One answer, no tools: a resumed step replies; it does not start work.
    request = build_request(agent_turn, [], inbox)
    sink = DjangoEventSink(run.pk)
    try:
        with model_call(run.pk, step.step_id) as hooks:
            completion = provider_for(agent).complete(request, **hooks)
    except ProviderError as exc:
        do_fail_resume(step.pk, str(exc))
        return
    with transaction.atomic():
        lock_run(run.pk)
        if not Step.objects.filter(pk=step.pk, resuming=True, turns=step.turns).update(turns=F("turns") + 1):
            return
        router = router_for(run.pk)
        result = apply_completion(
            agent_turn, request, completion, inbox, router=router, sink=sink, registry=REGISTRY, tools=[]
        )
        save_turn(step, result)
        reply = router.send(step.step_id, result.output or "(no answer)", MessageType.RESUME_REPLY)
        data = {"reply": result.output[:2000], "message_id": reply.message_id}
        sink.emit(RuntimeEvent("resume_completed", step.step_id, data))
        Step.objects.filter(pk=step.pk).update(resuming=False)
        # Messages forwarded while this resume ran have no turn to read them.
        router.drop_unread(step.step_id, DropReason.TARGET_TERMINAL)
        schedule_after_commit(run.pk)


def do_fail_resume(step_pk: int, error: str) -> None:
    """A resume that could not answer: say why, drop what it was given."""
    with transaction.atomic():
        lock_run(_run_of(step_pk))
        step = Step.objects.get(pk=step_pk)
        if not Step.objects.filter(pk=step.pk, resuming=True).update(resuming=False):
            return
        DjangoEventSink(step.run_id).emit(RuntimeEvent("resume_failed", step.step_id, {"error": error}))
        router_for(step.run_id).drop_unread(step.step_id, DropReason.TARGET_TERMINAL)
        schedule_after_commit(step.run_id)


def _run_of(step_pk: int) -> int:
    return Step.objects.values_list("run_id", flat=True).get(pk=step_pk)
