"""What follows when a step ends other than by its answer: a failed or
cancelled step (its dependents follow the run's failure policy), the end of
a repeat-until iteration (done, judged, or the next iteration; also after
a completion), and the scheduling pass after commit.

The failure policy and a loop's end call each other (a failed loop's
dependents stop; a stopped step can end its loop's iteration), so they
live together."""

from __future__ import annotations

from django.db import transaction

from agents import expansion, repeat_loops, telemetry
from agents.core import loops, machine
from agents.core.decisions import RetryStep
from agents.core.happenings import AttemptFailed
from agents.events import Event as RuntimeEvent
from agents.events.run_events import (
    Error,
    LoopEnd,
    LoopIteration,
    LoopJudge,
    LoopJudged,
    Message,
    StepCancelled,
    StepRetry,
    StepSkipped,
)
from agents.llm import ProviderError
from agents.llm.base import CompletionRequest
from agents.router import DropReason, MessageType, RouterMessage
from agents.spec.lookup import step_at
from runs import metrics, queue
from runs.actions.catalog import spec_of, workflow_spec
from runs.actions.common import router_for
from runs.actions.containers import create_steps, iteration_of, iteration_prefix, repeat_loop_of
from runs.actions.ending import cancel_step_children_after_commit, lapse_pending
from runs.actions.lost_loops import followed
from runs.actions.model_calls import ask
from runs.actions.run_states import coordinator_plans_first, run_state
from runs.actions.scheduling import apply_decisions, schedule
from runs.models import Run, Step, ToolCall
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork, UnitPerEventSink


def after_step_terminal(step: Step) -> bool:
    """If ``step`` ended the iteration of a repeat-until loop it ran in,
    decide what follows, and say so (True). Call inside the transaction
    that ended it."""
    loop_id = repeat_loop_of(step.step_id)
    if loop_id is None:
        return False
    run = Run.objects.select_related("workflow").get(pk=step.run_id)
    prefix = iteration_prefix(step.step_id, loop_id)
    members = list(run.steps.filter(step_id__startswith=prefix).exclude(kind=Step.Kind.LOOP))
    outcome = loops.iteration_outcome(member.status for member in members)
    if outcome is None:
        return False
    loop = run.steps.select_for_update().get(step_id=loop_id)
    if loop.is_terminal:
        return False
    iteration = iteration_of(prefix)
    if not outcome:
        apply_loop_decision(run, loop, iteration, repeat_loops.incomplete_iteration(loop_id, iteration))
        return True
    decide(run, loop, iteration)
    return True


def decide(run: Run, loop: Step, iteration: int, verdict: bool | None = None, *, waited: bool = False) -> None:
    """Apply what the state machine decides follows iteration ``iteration``
    of ``loop`` (agents/core/loops.py, through repeat_loops.next_iteration)."""
    rows = list(run.steps.filter(step_id__startswith=f"{loop.step_id}.").values_list("step_id", "output", "status"))
    finished = repeat_loops.Finished(
        {step_id: output for step_id, output, _ in rows}, {step_id: status for step_id, _, status in rows}
    )
    decision = repeat_loops.next_iteration(
        workflow_spec(run.workflow),
        loop.step_id,
        iteration,
        finished,
        inputs=run.inputs,
        verdict=verdict,
        run_steps=run.steps.filter(kind=Step.Kind.STEP).count(),
    )
    apply_loop_decision(run, loop, iteration, decision, waited=waited)


def apply_loop_decision(
    run: Run, loop: Step, iteration: int, decision: repeat_loops.LoopDecision, *, waited: bool = False
) -> None:
    """End the loop, ask its judge, or create its next iteration's steps
    (after the loop's delay, unless ``waited`` already)."""
    sink = UnitPerEventSink(run.pk)  # what it calls writes events of its own
    if decision.action == "done":
        _end_loop(run, loop, Step.Status.COMPLETED, decision.reason, output=decision.output)
    elif decision.action == "fail":
        _end_loop(run, loop, Step.Status.FAILED, decision.reason)
    elif decision.action == "judge":
        sink.emit(RuntimeEvent.of(LoopJudge(iteration=iteration, agent=decision.agent), loop.step_id))
        queue.send_after_commit(queue.JUDGE_LOOP, loop.pk, iteration)
    elif decision.delay and not waited:
        text = f"waiting {decision.delay:g}s (the loop's delay) before iteration {iteration + 1}"
        sink.emit(RuntimeEvent.of(Message(text=text, reason="loop-delay"), loop.step_id))
        queue.send_after_commit_in(decision.delay, queue.NEXT_ITERATION, loop.pk, iteration)
    else:
        create_steps(run, decision.steps)
        schedule_after_commit(run.pk)
        next_iteration = LoopIteration(iteration=iteration + 1, steps=[s.runtime_id for s in decision.steps])
        sink.emit(RuntimeEvent.of(next_iteration, loop.step_id))


def do_judge_loop(loop_pk: int, iteration: int) -> None:
    """Ask a loop's untilAgent whether the iteration finished the loop."""
    loop = Step.objects.select_related("run__workflow").get(pk=loop_pk)
    run = loop.run
    if loop.is_terminal or run.is_terminal or followed(run, loop.step_id, iteration) in ("started", "judged"):
        return  # judged already: this task was queued again on resume
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
        tools=[repeat_loops.judge_tool(agent.result_schema)] if agent.result_schema is not None else [],
        model=agent.model,
        temperature=agent.temperature,
        top_p=agent.top_p,
        variables={"iteration": str(iteration)},
    )
    try:
        with telemetry.agent_span(run.trace_context, run.pk, pending.agent, loop.step_id):
            completion = ask(agent, request, run.pk, loop.step_id)
    except ProviderError as exc:
        # zenflow's judge fails open: its error is the iteration's verdict
        # (not done), and the loop goes on, bounded by maxIterations.
        _judged(run, loop_pk, iteration, False, f"untilAgent judge failed (iteration {iteration + 1}): {exc}")
        return
    calls = [(call.name, call.arguments) for call in completion.tool_calls]
    # A judge that answered with submit_result: its result is what it said.
    answer = completion.content or next((arguments for name, arguments in calls if name == "submit_result"), "")
    _judged(run, loop_pk, iteration, repeat_loops.judge_decision(answer, calls), answer)


def _judged(run: Run, loop_pk: int, iteration: int, verdict: bool, answer: str) -> None:
    """Record the judge's ``verdict`` on ``iteration`` (its loop_judged
    event, with its ``answer``) and apply what follows it."""
    with transaction.atomic(), UnitOfWork(run.pk) as uow:
        uow.lock_run()
        loop = Step.objects.select_for_update().get(pk=loop_pk)
        if loop.is_terminal or followed(run, loop.step_id, iteration) in ("started", "judged"):
            return  # a judge asked again on resume, after one that answered
        judged = LoopJudged(iteration=iteration, done=verdict, answer=answer[:2000])
        uow.sink.emit(RuntimeEvent.of(judged, loop.step_id))
        uow.flush()  # before the decision's events
        decide(run, loop, iteration, verdict)


def _end_loop(run: Run, loop: Step, status: str, reason: str, *, output: str = "") -> None:
    """End a repeat-until loop ``status``, for ``reason`` (in its loop_end
    event); a completed one's ``output`` is what its dependents read."""
    store().end_step(loop, status, output=output, error="" if status == Step.Status.COMPLETED else reason)
    with UnitOfWork(run.pk) as uow:
        uow.sink.emit(RuntimeEvent.of(LoopEnd(status=status, reason=reason), loop.step_id))
    if status != Step.Status.COMPLETED:
        apply_failure_policy(loop, f"loop {loop.step_id} failed")
    # A loop inside another repeat-until loop ends that loop's iteration too.
    after_step_terminal(loop)
    schedule_after_commit(run.pk)


def schedule_after_commit(run_id: int, state: tuple | None = None, finished: Step | None = None) -> None:
    """Schedule the run after commit; ``state``: its scheduling state, read
    under the run's lock before commit (last_turn.save);
    ``finished``: the step whose completion this follows (the state machine
    then decides on its dependents)."""
    transaction.on_commit(lambda: schedule(run_id, state, finished))


def do_fail_step(step_pk: int, error: str, attempt: int | None = None) -> bool:
    """Record why a step failed, or run it again (its retries); its pending
    approvals lapse, and what the state machine decides follows is applied
    (apply_failure_policy). False if it had ended already, or if the
    ``attempt`` that failed is not the step's running one (a late failure of
    an attempt that was retried)."""
    with transaction.atomic(), UnitOfWork(run_of(step_pk)) as uow:
        uow.lock_run()
        step = Step.objects.select_for_update().get(pk=step_pk)
        if step.is_terminal or (attempt is not None and attempt != step.attempt):
            return False
        if _retried(step, error, uow):
            return True
        store().end_step(step, Step.Status.FAILED, error=error)
        metrics.step_ended(step, Step.Status.FAILED)
        uow.sink.emit(RuntimeEvent.of(Error(error=error), step.step_id))
        _step_stopped(step, f"step {step.step_id} failed", uow)
        router_for(step.run_id, uow=uow).close(step.step_id)
        uow.flush()  # before the events of what the failure leads to
        apply_failure_policy(step, f"dependency {step.step_id} failed")
        after_step_terminal(step)
    return True


def _retried(step: Step, error: str, uow: UnitOfWork) -> bool:
    """Whether the state machine runs ``step`` again after its attempt
    failed with ``error`` (its ``retries``: agents/core/attempts.py), and if
    so the retry, applied: a fresh attempt whose first turn is queued, what
    the failed attempt waited for gone, a step_retry event. Call with the
    run's lock held."""
    retries = retries_of(step) if step.kind == Step.Kind.STEP else 0
    if not retries:
        return False
    (decision,) = machine.decide(machine.UNREAD, AttemptFailed(step.step_id, step.attempt, retries, error))
    if not isinstance(decision, RetryStep):
        return False
    lapse_pending(step.run_id, f"step {step.step_id} attempt {step.attempt + 1} failed", uow, step_id=step.step_id)
    cancel_step_children_after_commit(step)
    store().retry_step(step, decision.attempt)
    retry = StepRetry(attempt=decision.attempt + 1, error=error)
    uow.sink.emit(RuntimeEvent.of(retry, step.step_id))
    queue.send_after_commit(queue.RUN_STEP_TURN, step.pk, 1)
    return True


def retries_of(step: Step) -> int:
    """How many times ``step`` may run again after a failed attempt."""
    run = Run.objects.select_related("workflow").get(pk=step.run_id)
    return expansion.step_retries(workflow_spec(run.workflow)).get(expansion.condition_path(step.step_id), 0)


def do_next_iteration(loop_pk: int, iteration: int) -> None:
    """Go on after iteration ``iteration`` of a loop once its delay has
    passed: decided again (the same decision: a judge's verdict was not
    done), its next iteration's steps created at once."""
    with transaction.atomic():
        loop = Step.objects.select_related("run__workflow").get(pk=loop_pk)
        store().lock_run(loop.run_id)
        loop.refresh_from_db()
        run = loop.run
        run.refresh_from_db()
        started = run.steps.filter(step_id__startswith=f"{loop.step_id}.{iteration + 1}.").exists()
        if loop.is_terminal or run.is_terminal or started:
            return
        spec = step_at(workflow_spec(run.workflow), expansion.condition_path(loop.step_id))
        judged = spec is not None and spec.loop is not None and spec.loop.until_agent is not None
        decide(run, loop, iteration, False if judged else None, waited=True)


def do_end_iteration(run_id: int, step_id: str) -> None:
    """What follows the repeat-until iteration step ``step_id`` ended
    before it started (its condition: runs/actions/not_started.py), if it
    was the iteration's last step to end."""
    with transaction.atomic():
        store().lock_run(run_id)
        step = Step.objects.filter(run_id=run_id, step_id=step_id).first()
        if step is not None and step.is_terminal and not _followed_already(step):
            after_step_terminal(step)


def _followed_already(step: Step) -> bool:
    """Whether what follows the iteration ``step`` ended is under way (an
    end_iteration queued again on resume, after one that ran)."""
    loop_id = repeat_loop_of(step.step_id)
    if loop_id is None:
        return False
    iteration = iteration_of(iteration_prefix(step.step_id, loop_id))
    return followed(step.run, loop_id, iteration) is not None


def do_stop_waiting_step(run_id: int, step_id: str) -> None:
    """Cancel now a step that a cancel was forwarded to while it waits for
    a call's result (an approval, a tool task, a child run): no turn would
    read the cancel until the result came, and an approval could still run
    the call. A step mid-turn reads it at its next turn, as before."""
    with transaction.atomic():
        store().lock_run(run_id)
        step = Step.objects.filter(run_id=run_id, step_id=step_id, status=Step.Status.RUNNING).first()
        # Under the run's lock a step with pending calls is between turns:
        # its next turn is queued only once none is pending (deliver_result).
        if step is None or not ToolCall.objects.filter(step=step, status__in=ToolCall.PENDING).exists():
            return
        inbox = DjangoMailboxStore(run_id).unread(step_id)
        if any(message.type == MessageType.CANCEL for message in inbox):
            cancel_step(step, inbox)


def cancel_step(step: Step, inbox: list[RouterMessage]) -> None:
    """A forward of kind cancel stops the step at this turn boundary."""
    with transaction.atomic(), UnitOfWork(step.run_id) as uow:
        uow.lock_run()
        if not store().end_step(step, Step.Status.CANCELLED, only_from=Step.Status.RUNNING):
            return
        router = router_for(step.run_id, uow=uow)
        router.drain(step.step_id, only=inbox)
        cancel = next(m for m in inbox if m.type == MessageType.CANCEL)
        cancelled = StepCancelled(message_id=cancel.message_id, reason=cancel.content)
        uow.sink.emit(RuntimeEvent.of(cancelled, step.step_id))
        step.status = Step.Status.CANCELLED
        _step_stopped(step, f"step {step.step_id} was cancelled: {cancel.content}", uow)
        router.close(step.step_id)
        uow.flush()  # before the events of what the cancel leads to
        apply_failure_policy(step, f"dependency {step.step_id} was cancelled")
        after_step_terminal(step)


def _step_stopped(step: Step, reason: str, uow: UnitOfWork) -> None:
    """What a step that stopped unfinished leaves waiting goes with it: its
    pending approvals lapse (approved, a call would still run) and the
    child runs of its calls are cancelled. Call with the run's lock held,
    ``step.status`` set. (A run that ends does the same for all its work.)"""
    lapse_pending(step.run_id, reason, uow, step_id=step.step_id)
    cancel_step_children_after_commit(step)


def apply_failure_policy(stopped: Step, reason: str) -> None:
    """What the state machine decides follows ``stopped`` failing or being
    cancelled (machine.decide with StepEnded; ``stopped.status`` set and
    written), applied under the run's lock the caller holds: onStepFailure
    first, cascade (dependents are cancelled), skip-dependents (skipped) or
    abort (every unfinished step is cancelled and every later message to
    them drops as workflow-cancelled); then the steps that may start start,
    and the coordinator wakes (to plan, or to finish once every step is done)."""
    locked = store().locked_schedule_state(stopped.run_id)
    if locked is None:
        return
    (status, busy, has_mail, _, _, workflow_id, created), rows = locked
    spec = spec_of(workflow_id, created)
    plans = coordinator_plans_first(stopped.run_id, spec) if not (busy or has_mail) else False
    coordinator = machine.CoordinatorState(busy=busy, has_mail=has_mail, plans_first=plans)
    state = run_state(status, rows, spec, coordinator, stopped.run_id)
    decisions = machine.decide(state, machine.StepEnded(stopped.step_id, stopped.status))
    stops = [d for d in decisions if isinstance(d, machine.StopSteps)]
    affected = [step for stop in stops for step in _stop_steps(stopped.run_id, stop, reason)]
    # What starts, and the coordinator's wake, before a loop whose iteration
    # lost its steps moves on: that decides again on what it leaves.
    apply_decisions(stopped.run_id, rows, tuple(d for d in decisions if not isinstance(d, machine.StopSteps)))
    for step in affected:
        # A loop iteration that just lost its steps ends its loop.
        after_step_terminal(step)


def _stop_steps(run_id: int, stop: machine.StopSteps, reason: str) -> list[Step]:
    """Apply ``stop`` (the failure policy's), for ``reason``: the steps it
    stops, each with its event, its mailbox closed, what it waited for gone."""
    if stop.aborted:
        reason = f"run aborted: {reason.removeprefix('dependency ')}"
    with UnitOfWork(run_id) as uow:
        uow.mark_locked()  # by the caller
        return _stop_each(run_id, stop, reason, uow)


def _stop_each(run_id: int, stop: machine.StopSteps, reason: str, uow: UnitOfWork) -> list[Step]:
    router = router_for(run_id, uow=uow)
    by_id = {step.step_id: step for step in Step.objects.filter(run_id=run_id, step_id__in=stop.step_ids)}
    affected = [by_id[step_id] for step_id in stop.step_ids]
    drop = DropReason.WORKFLOW_CANCELLED if stop.drop == "workflow_cancelled" else DropReason.TARGET_TERMINAL
    for step in affected:
        was_running = step.status == Step.Status.RUNNING
        store().end_step(step, stop.status)
        uow.sink.emit(RuntimeEvent.of(StepSkipped(reason=reason, status=stop.status), step.step_id))
        if was_running:  # only a running step can wait for a decision or a child
            _step_stopped(step, f"step {step.step_id} was {stop.status}: {reason}", uow)
        if step.kind == Step.Kind.STEP:
            router.close(step.step_id, drop)
    return affected


def run_of(step_pk: int) -> int:
    return Step.objects.values_list("run_id", flat=True).get(pk=step_pk)
