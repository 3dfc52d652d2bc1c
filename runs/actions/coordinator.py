"""The coordinator's wakes: route its inbox, or finish the run.

At most one wake runs per run (a conditional UPDATE of coordinator_busy);
a message that arrives during a wake bumps wake_requests, and the wake only
goes idle if none arrived meanwhile, so no message is left unrouted.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agents import coordinator_prompts as prompts
from agents import telemetry
from agents.core import machine
from agents.core.decisions import CoordinatorRounds, DropMail, FinishRun, LastRound
from agents.core.happenings import CoordinatorAnswered, CoordinatorWoke
from agents.events import Event as RuntimeEvent
from agents.events.run_events import (
    AgentIdle,
    AgentWake,
    CoordinatorOverBudget,
    CoordinatorSynthesis,
    MaxWakeCyclesWarning,
)
from agents.llm import Completion, CompletionRequest, ProviderError, tokens
from agents.router import COORDINATOR, DoubleDrainError, DropReason, MessageRouter, RouterMessage
from agents.runner import AgentTurn, TurnResult, apply_completion, build_request
from agents.spec import AgentSpec, WorkflowSpec
from agents.tools import Tool, ToolRegistry
from agents.tools.builtin.messaging import MAX_MESSAGE_CHARS
from runs.actions.catalog import workflow_spec
from runs.actions.common import Limits, router_for, save_turn
from runs.actions.deadlines import enforce_budget_after_commit, run_deadline, timeout_breach
from runs.actions.ending import do_fail_run, do_finish_run, finish_locked
from runs.actions.model_calls import model_call, provider_for
from runs.actions.run_states import plans_first
from runs.actions.scheduling import schedule
from runs.actions.tool_host import tool_env, try_examples
from runs.actions.tooling import tools_for
from runs.models import Run, Step
from runs.store.events import broadcast
from runs.store.sql import WakeStep, store
from runs.store.sql.errors import connection_lost
from runs.store.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

# A coordinator wake may call tools and look at their results this many times.
MAX_COORDINATOR_ROUNDS = 8

# How much of each step's output the "finish" prompt quotes; over the
# per-invocation budget (options.budget.coordinatorTokens), the compact figure.
FINISH_OUTPUT_CHARS = 2000
COMPACT_FINISH_OUTPUT_CHARS = 300
# An output a completed step read (it depends on it) is in that step's
# output already: the finish prompt quotes its start and names its readers.
READ_OUTPUT_CHARS = 300


def do_coordinator_wake(run_id: int) -> None:
    """Let the coordinator handle its inbox, or finish the run once every
    step is done. At most one wake runs per run; a wake asked for while one
    runs is handled by that one before it goes idle."""
    # The run (with its workflow) comes with its coordinator's row, its
    # steps and the coordinator's inbox.
    wake = store().claim_wake(run_id)
    if wake is None:
        # The wake that runs reads what this one was queued for; a later
        # request may queue another (runs/store/sql/runs.py wake_sql).
        store().clear_wake_mark(run_id)
        return
    try:
        while True:
            coordinator, steps, inbox = wake
            run = coordinator.run
            if run.status != Run.Status.RUNNING:
                return
            seen = run.wake_requests
            with telemetry.agent_span(run.trace_context, run_id, COORDINATOR, COORDINATOR):
                ended = _wake(coordinator, steps, inbox)
            if ended:
                return
            if store().release_coordinator(run_id, unless_asked_since=seen):
                schedule(run_id, idle=True)
                return
            wake = store().read_wake(run_id)  # messages came meanwhile: read again
    except DoubleDrainError:
        # The run was cancelled or ended while this wake read its inbox; the
        # messages were dropped with their events. Nothing is left to do.
        store().release_coordinator(run_id)
    except ProviderError as exc:
        # A call cut off by the run's timeout fails the run for that reason.
        run = Run.objects.select_related("workflow").get(pk=run_id)
        do_fail_run(run_id, timeout_breach(run, workflow_spec(run.workflow).options) or f"coordinator: {exc}")
    except Exception as exc:
        if connection_lost(exc):
            raise  # the task retries the wake (runs/tasks.py)
        log.exception("coordinator wake of run %s failed", run_id, extra={"run_id": run_id})
        do_fail_run(run_id, f"coordinator: internal error: {type(exc).__name__}: {exc}")


def _wake(coordinator: Step, steps: list[WakeStep], inbox: list[RouterMessage]) -> bool:
    """Apply what the state machine decides the coordinator's wake does with
    its run as the wake read it (machine.CoordinatorWoke: plan, route its
    mail within its wake-cycle cap, or finish the run): whether the run ended."""
    run = coordinator.run
    states = tuple(machine.StepState(step.step_id, step.status, resuming=step.resuming) for step in steps)
    cap = Limits.of(run).coordinator_wake_cycles
    woke = CoordinatorWoke(plans_first(run), len(inbox), coordinator.turns, cap, finalized=bool(run.result))
    for decision in machine.decide(machine.RunState(run.status, states), woke):
        match decision:
            case CoordinatorRounds(reason="messages"):
                _coordinator_rounds(coordinator, decision, inbox, steps)
            case CoordinatorRounds():
                if _coordinator_rounds(coordinator, decision, [], steps):
                    return True  # the finish's last round ended the run
            case DropMail():
                # Past its wake-cycle cap the coordinator stops reading.
                with transaction.atomic(), UnitOfWork(run.pk) as uow:
                    router_for(run.pk, uow=uow).close(COORDINATOR, DropReason.MAX_WAKE_CYCLES)
            case FinishRun():
                owes = workflow_spec(run.workflow).coordinator.require_workers and not _workers(run.pk)
                # A run whose coordinator spawned workers as it finished goes
                # on: the wake goes idle, they start, and their end wakes it again.
                return do_finish_run(run.pk, owes_workers=owes)
    return False


def release_wake(run_id: int) -> None:
    """Free the coordinator of a wake that stopped on a lost database
    connection (it was busy until its end): the retried wake can then run."""
    store().release_coordinator(run_id)


@dataclass
class _Rounds:
    """What every model turn of one coordinator wake reads: the wake, the
    inbox it was woken with, its turn (transcript, variables, tool env), its
    tools, and the unit of work and router its rounds write through."""

    coordinator: Step
    wake: CoordinatorRounds
    inbox: list[RouterMessage]
    spec: WorkflowSpec
    turn: AgentTurn
    registry: ToolRegistry
    tools: list[Tool]
    uow: UnitOfWork
    router: MessageRouter
    view: prompts.RunView
    outputs: dict[str, str]
    # Each step's completed readers (the steps that depend on it).
    read_by: dict[str, list[str]]

    def first_extra(self, output_chars: int = FINISH_OUTPUT_CHARS) -> str:
        """What the first round's prompt adds: where the run stands (the
        system prompt was written at the first wake), and the plan or finish
        prompt, quoting ``output_chars`` of each step's output."""
        extra = prompts.states_text(self.view.steps)
        if self.wake.reason == "plan":
            extra += "\n\n" + prompts.plan_prompt(self.view)
        elif self.wake.reason == "finish":
            fix_ups = _fix_ups(self.turn.agent, self.wake)
            extra += "\n\n" + _finish_prompt(self.outputs, self.read_by, output_chars, fix_ups)
        return extra


def _coordinator_rounds(
    coordinator: Step, wake: CoordinatorRounds, inbox: list[RouterMessage], steps: list[WakeStep]
) -> bool:
    """The coordinator's model turns of one wake (at most
    MAX_COORDINATOR_ROUNDS), its run as the wake read it with the
    coordinator: whether the last of a finish ended the run."""
    run = coordinator.run
    _count_wake(coordinator, wake, len(inbox))
    rounds = _rounds_of(coordinator, wake, inbox, steps)
    provider = provider_for(rounds.turn.agent)
    budget = rounds.spec.options.budget.coordinator_tokens
    deadline = run_deadline(run, rounds.spec.options)
    extra = rounds.first_extra()
    for round_no in range(MAX_COORDINATOR_ROUNDS):
        shown = inbox if round_no == 0 else []
        request = build_request(rounds.turn, rounds.tools, shown, extra if round_no == 0 else "", deadline=deadline)
        if budget is not None and prompt_tokens(request) > budget:
            request = _over_budget(rounds, request, budget, round_no)
            # Recorded once a wake; later rounds are the same conversation grown.
            budget = None
        with model_call(run.pk, COORDINATOR) as hooks:
            completion = provider.complete(request, **hooks)
        try_examples(rounds.turn, completion)  # create_tool's, while no lock is held
        recorded = _record_round(rounds, request, completion, shown)
        if recorded is None:
            # The run ended (cancelled, failed, timed out) while the model
            # thought: its answer is neither acted on nor recorded.
            return False
        result, last, ends_run = recorded
        if result.status == "failed":
            do_fail_run(run.pk, f"coordinator: {result.error}")
            return False
        rounds.turn.transcript = result.transcript
        if last:
            return ends_run
    with transaction.atomic(), rounds.uow:
        rounds.uow.sink.emit(_idle(coordinator))
    return False


def _count_wake(coordinator: Step, wake: CoordinatorRounds, messages: int) -> None:
    """Count the wake on the coordinator's row, with its agent_wake event
    (and the wake-cycle warning when it is due). Counted here: only the
    wake that holds coordinator_busy changes the coordinator's turns."""
    woke = [RuntimeEvent.of(AgentWake(reason=wake.reason, cycle=wake.cycle, messages=messages), COORDINATOR)]
    if wake.warn:
        woke.append(RuntimeEvent.of(MaxWakeCyclesWarning(cycle=wake.cycle, max=wake.max_cycles), COORDINATOR))
    run_id = coordinator.run_id
    broadcast(run_id, store().count_wake(run_id, coordinator.pk, wake.cycle, woke, timezone.now()))
    coordinator.turns = wake.cycle


def _rounds_of(
    coordinator: Step, wake: CoordinatorRounds, inbox: list[RouterMessage], steps: list[WakeStep]
) -> _Rounds:
    """The coordinator's turn of this wake, its tools, and what its rounds write through."""
    run = coordinator.run
    spec = workflow_spec(run.workflow)
    agent = spec.agents.get(COORDINATOR) or AgentSpec()
    view = prompts.RunView(
        workflow=spec.name,
        inputs=run.inputs,
        steps=[prompts.PromptStep(s.step_id, s.agent, s.status, s.instructions) for s in steps],
        command=run.command,
        description=spec.description,
        criteria=spec.success_criteria,
    )
    outputs = {s.step_id: s.output if s.status == Step.Status.COMPLETED else f"({s.status}) {s.error}" for s in steps}
    read_by: dict[str, list[str]] = {}
    for step in steps:
        if step.status == Step.Status.COMPLETED:
            for source in step.depends_on:
                read_by.setdefault(source, []).append(step.step_id)
    turn = AgentTurn(
        run_id=str(run.pk),
        step_id=COORDINATOR,
        agent_name=COORDINATOR,
        agent=agent,
        role="coordinator",
        transcript=coordinator.transcript or [{"role": "system", "content": prompts.system_prompt(view, agent.system)}],
        variables={
            **{name: str(value) for name, value in run.inputs.items()},
            "wake_reason": wake.reason,
            "inbox_json": json.dumps([{"from": m.sender, "content": m.content, "type": str(m.type)} for m in inbox]),
            "outputs_json": json.dumps(outputs),
        },
    )
    registry, tools = tools_for(spec, "coordinator", agent.tool_names)
    # A round's writes: held, and written together when it is recorded.
    uow = UnitOfWork(run.pk)
    turn.env = tool_env(run, coordinator, uow, wake=wake)
    # A wake for messages may well have nothing to say; one that must plan
    # or finish the run has not done its part with an empty answer.
    planning = wake.reason in ("plan", "finish")
    turn.empty_answer_retries = spec.options.max_empty_answer_retries if planning else None
    turn.env.require_workers = spec.coordinator.require_workers
    if turn.env.require_workers:
        turn.env.workers = _workers(run.pk)
    # A bare target id picks the sender's iteration only when the inbox came
    # from one step; with several senders it is unclear whom a forward answers.
    senders = {message.sender for message in inbox}
    context = senders.pop() if len(senders) == 1 else None
    # The run as this wake read it: a run that ends meanwhile is found by uow.lock() in each round.
    router = router_for(run, finishing=wake.reason == "finish", context_sender=context, uow=uow)
    return _Rounds(coordinator, wake, inbox, spec, turn, registry, tools, uow, router, view, outputs, read_by)


def _over_budget(rounds: _Rounds, request: CompletionRequest, budget: int, round_no: int) -> CompletionRequest:
    """A prompt past the per-invocation budget, recorded: the request to
    send instead. Only the first "finish" prompt can be made smaller: the
    inbox must be read, and the transcript is the coordinator's memory."""
    compact = None
    if rounds.wake.reason == "finish" and round_no == 0:
        compact_extra = rounds.first_extra(COMPACT_FINISH_OUTPUT_CHARS)
        compact = build_request(rounds.turn, rounds.tools, rounds.inbox, compact_extra)
    where: dict[str, object] = {"reason": rounds.wake.reason, "cycle": rounds.coordinator.turns, "round": round_no + 1}
    return _record_over_budget(rounds.coordinator.run_id, request, compact, budget, where)


def _record_round(
    rounds: _Rounds, request: CompletionRequest, completion: Completion, shown: list[RouterMessage]
) -> tuple[TurnResult, bool, bool] | None:
    """Record one round's answer in its own transaction, under the run's
    lock: its result, whether it was the wake's last, and whether it ended
    the run. None (nothing recorded) if the run is no longer running."""
    coordinator, turn, uow = rounds.coordinator, rounds.turn, rounds.uow
    run, reason = coordinator.run, rounds.wake.reason
    with transaction.atomic(), uow:
        # The run's lock, and the message counter read after it: a turn's
        # forwards, written together.
        if uow.lock() != Run.Status.RUNNING:
            return None
        result = apply_completion(
            turn,
            request,
            completion,
            shown,
            router=rounds.router,
            registry=rounds.registry,
            tools=rounds.tools,
        )
        summary = _summary(rounds, result)
        # finalize is the coordinator's last word: the model is not asked
        # again to read its "finalized" (a request nobody needs, and tokens).
        # The last round of a finish ends the run in its own transaction
        # (the run locked since uow.lock()), unless the workflow's
        # coordinator owes workers: the wake then fails the run for it.
        awaited = turn.env is not None and turn.env.awaited_workers > 0
        answered = CoordinatorAnswered(
            reason, result.status, result.finalized is not None, _owes_workers(turn), awaited
        )
        after = machine.decide(machine.RunState(Run.Status.RUNNING), answered)
        last, ends_run = LastRound() in after, FinishRun() in after
        if last:
            uow.sink.emit(_idle(coordinator))
        # The round's forwards and events go in before the turn is saved, in one statement.
        uow.flush()
        save_turn(coordinator, result)
        enforce_budget_after_commit(run.pk, rounds.spec)
        if summary is not None:
            run.result = summary
            if not ends_run:  # else written with the run's end
                store().set_run_result(run.pk, summary)
        if ends_run:
            ends_run = finish_locked(run)
    return result, last, ends_run


def _summary(rounds: _Rounds, result: TurnResult) -> str | None:
    """The run's result this round gives: its finalize's summary, or a
    finish's plain answer when the coordinator owes no worker's result
    (emitted as its synthesis). Counts the workers the round spawned."""
    env = rounds.turn.env
    assert env is not None  # set by _rounds_of
    spawned = sum(1 for call in result.tool_calls if call.name == "spawn_worker" and call.ok)
    env.workers += spawned
    env.awaited_workers += spawned
    # Workers spawned in this wake have yet to run: an answer is not the run's result.
    gives_result = not _owes_workers(rounds.turn) and not env.awaited_workers
    summary = result.finalized
    if summary is None and rounds.wake.reason == "finish" and result.status == "completed" and gives_result:
        # A model that writes the summary as its answer instead of
        # calling finalize has still given the run's result (an empty
        # answer never gets here: it got a hint or failed the run).
        summary = result.output.strip()[:MAX_MESSAGE_CHARS]
        rounds.uow.sink.emit(RuntimeEvent.of(CoordinatorSynthesis(summary=summary), COORDINATOR))
    return summary


def _idle(coordinator: Step) -> RuntimeEvent:
    """The end of a wake: with its last round's writes, or on its own after
    MAX_COORDINATOR_ROUNDS."""
    return RuntimeEvent.of(AgentIdle(cycle=coordinator.turns), COORDINATOR)


def _owes_workers(turn: AgentTurn) -> bool:
    """The workflow's coordinator must plan workers and has planned none:
    nothing it says finishes the run (a finalize is refused)."""
    return turn.env is not None and turn.env.require_workers and not turn.env.workers


def _workers(run_id: int) -> int:
    """How many workers the coordinator has spawned in this run."""
    return Step.objects.filter(run_id=run_id).exclude(spawned_by="").count()


def prompt_tokens(request: CompletionRequest) -> int:
    """What ``request`` costs as a prompt: its messages and tool schemas."""
    return tokens.count_messages(request.messages, request.model) + tokens.count_tools(request.tools, request.model)


def _finish_prompt(outputs: dict[str, str], read_by: dict[str, list[str]], limit: int, fix_ups: str) -> str:
    return (
        "Every step has finished. Their results:\n"
        + "\n".join(_quoted(step_id, text, limit, read_by.get(step_id)) for step_id, text in outputs.items())
        + f"\n{fix_ups}Call finalize(summary) with the run's result."
    )


def _quoted(step_id: str, output: str, limit: int, readers: list[str] | None) -> str:
    """A step's output as the finish prompt quotes it: its start only when
    a completed step read it whole (that step's output builds on it)."""
    if readers:
        return f"- {step_id} (read by {', '.join(readers)}): {output[: min(limit, READ_OUTPUT_CHARS)]}"
    return f"- {step_id}: {output[:limit]}"


def _fix_ups(agent: AgentSpec, wake: CoordinatorRounds) -> str:
    """What the finish prompt says of fix-ups: a coordinator that spawns
    workers may ask for more while a wake is left to read their results."""
    if "spawn_worker" not in agent.tool_names:
        return ""
    if wake.cycle >= wake.max_cycles:
        return f"No worker can be added: this is wake {wake.cycle} of {wake.max_cycles} (maxWakeCycles). "
    return (
        "If the results miss something, spawn_worker a fix-up for it and end your turn: you are woken "
        "again with its result. Otherwise: "
    )


def _record_over_budget(
    run_id: int, request: CompletionRequest, compact: CompletionRequest | None, budget: int, where: dict[str, object]
) -> CompletionRequest:
    """Emit ``coordinator_over_budget`` for a prompt past the per-invocation
    budget; the request to send is ``compact`` when there is one."""
    data = where | {"prompt_tokens": prompt_tokens(request), "budget_tokens": budget, "compacted": compact is not None}
    if compact is not None:
        data["compact_tokens"] = prompt_tokens(compact)
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.sink.emit(RuntimeEvent.of(CoordinatorOverBudget.model_validate(data), COORDINATOR))
    return compact or request
