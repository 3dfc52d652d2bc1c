"""Step turns: asking a step's model, recording its answer, and what follows
(another turn, a wake cycle for late messages, completion). A failed or
cancelled step: runs/actions/step_ends.py; timeouts: deadlines.py;
resumes of completed steps: resume.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from agents import telemetry
from agents.core import machine
from agents.core.decisions import AwaitCalls, CompleteStep, DropMail, FailStep, NextTurn, StartSteps, WakeAgain
from agents.core.happenings import ToolUse, TurnAnswered, TurnDue, WakeCount
from agents.events import Event as RuntimeEvent
from agents.events import ListSink
from agents.events.run_events import AgentWake, MaxWakeCyclesWarning, StepEnd
from agents.llm import Completion, CompletionRequest, ProviderError
from agents.router import DoubleDrainError, DropReason, MessageRouter, MessageType, RouterMessage
from agents.runner import (
    AgentTurn,
    ToolEnv,
    TurnResult,
    apply_completion,
    is_empty,
    run_side_effects,
)
from agents.spec import WorkflowOptions, WorkflowSpec
from agents.tools import Tool, ToolRegistry
from runs import leases, metrics, queue
from runs.actions.catalog import workflow_spec
from runs.actions.common import Limits, router_for, save_turn
from runs.actions.containers import repeat_loop_of
from runs.actions.deadlines import TurnLimits, enforce_budget_after_commit, stopped_by_deadline, turn_limits
from runs.actions.model_calls import ask, prepare_turn
from runs.actions.run_states import decided_from_rows
from runs.actions.scheduling import (
    Eager,
    EagerTurn,
    eager_successor,
    known_start,
    running,
    same_but,
    schedule,
    successor,
)
from runs.actions.step_ends import after_step_terminal, cancel_step, do_fail_step, schedule_after_commit
from runs.actions.tool_host import tool_env
from runs.models import Run, Step, ToolCall
from runs.store import last_turn
from runs.store.events import NoticeAfterCommit, broadcast
from runs.store.journal import DjangoToolJournal
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import StepRow, store
from runs.store.unit_of_work import UnitOfWork
from runs.store.wakes import stop_waiting_after_commit


def do_step_turn(step_pk: int, turn: int) -> Eager | None:
    """Take turn number ``turn`` of a step: ask its model, then record the
    answer in one transaction. A stale or repeated task does nothing.

    Returns what this worker is to do next itself, if the turn completed
    the step and that is one thing (see scheduling.schedule)."""
    # One worker per turn: a redelivered task, or a sweep racing a slow but
    # live worker, finds the lease taken (or the turn gone) and leaves.
    owner = leases.worker_identity()
    step = leases.claim_turn(step_pk, turn, owner)
    if step is None:
        return None
    with _turn_span(step):
        return _take_turn(step, turn, owner, EagerTurn(step, {}))


def do_eager_turn(follow: EagerTurn) -> Eager | None:
    """Take the first turn of the step that a completion or a run's start
    just started and claimed for this worker (scheduling.EagerTurn), as
    do_step_turn takes a turn it claimed."""
    with _turn_span(follow.step):
        return _take_turn(follow.step, 1, leases.worker_identity(), follow)


def _turn_span(step: Step):
    """The turn's ``invoke_agent`` span, in its run's trace."""
    return telemetry.agent_span(step.run.trace_context, step.run_id, step.agent, step.step_id)


@dataclass
class _Turn:
    """One turn of a step, as it is asked and recorded: the step (loaded for
    the turn), the worker that owns its lease, the workflow, the mail it was
    shown and what limits it; then (model_calls.prepare_turn) the agent's
    turn, its request and the tools it may call."""

    step: Step
    number: int
    owner: str
    spec: WorkflowSpec
    inbox: list[RouterMessage]
    limits: TurnLimits
    agent_turn: AgentTurn = field(init=False)
    request: CompletionRequest = field(init=False)
    registry: ToolRegistry = field(init=False)
    tools: list[Tool] = field(init=False)

    @cached_property
    def uow(self) -> UnitOfWork:
        """The turn's writes: held, and written together when it is recorded.
        Made when first needed (its tools' environment, the general record):
        the usual last turn writes without one (last_turn.write)."""
        return UnitOfWork(self.step.run_id)

    def stopped(self) -> bool:
        """Whether a deadline stopped the turn (its run or its step failed
        for it): never one with no deadline to pass (no timeout set)."""
        if self.limits.deadline is None:
            return False
        return stopped_by_deadline(self.step.run, self.step, self.spec)

    def check_budget_after_commit(self) -> None:
        """A run with a budget or a timeout is checked once the turn commits."""
        if self.limits.checked_after_commit:
            enforce_budget_after_commit(self.step.run_id, self.spec)


def _take_turn(step: Step, turn: int, owner: str, known: EagerTurn) -> Eager | None:
    """Turn ``turn`` of ``step``, claimed by ``owner``: see do_step_turn.
    ``known``: what the worker knows of the run already (outputs of steps
    it may depend on, its step rows)."""
    run = step.run
    spec = workflow_spec(run.workflow)
    # Most turns (a fan-out's every one) have no mail: the count came with the step.
    inbox = DjangoMailboxStore(run.pk).unread(step.step_id) if step.unread else []
    if any(message.type == MessageType.CANCEL for message in inbox):
        cancel_step(step, inbox)
        return None
    # The agent's own (zenflow's); 0 is unset.
    max_turns = spec.agents[step.agent].max_turns or spec.options.max_turns
    for decision in machine.decide(machine.UNREAD, TurnDue(step.step_id, turn, max_turns)):
        if isinstance(decision, FailStep):
            do_fail_step(step.pk, decision.error, step.attempt)
            return None
    taken = _Turn(step, turn, owner, spec, inbox, turn_limits(run, step, spec))
    if taken.stopped():
        return None
    prepared = prepare_turn(step, spec, inbox, known.outputs, taken.limits.deadline)
    taken.agent_turn, taken.request, taken.registry, taken.tools = prepared
    completion = _ask_model(taken)
    if completion is None:
        return None
    recorded, follow = _last_turn_in_one_trip(taken, completion, known.rows)
    if recorded:
        return follow
    # Built before the run's lock is taken: every step of the run waits for
    # that lock, so what does not need it stays out of it. (A step only
    # sends to the coordinator: the run's status, read before the model
    # answered, is never consulted.) It routes only inside the block whose
    # first UPDATE takes the run's lock: it need not take it again.
    _record_answer(taken, completion, router_for(run, uow=taken.uow))
    return None


def _ask_model(taken: _Turn) -> Completion | None:
    """Ask the model, under the turn's lease, and run the side effects of
    the calls it answers with: the answer, or None when there is nothing to
    record (the model call failed, and the step with it; a deadline passed)."""
    step = taken.step
    try:
        with leases.renewing(step.pk, taken.owner):
            completion = ask(taken.agent_turn.agent, taken.request, step.run_id, step.step_id)
            # An answer that came back past a deadline is not acted on, nor
            # recorded (checked again below: its tools may have run long).
            late = taken.stopped()
            if completion.tool_calls:
                journal = DjangoToolJournal(step.pk, taken.owner, outside_transaction=True)
                taken.agent_turn.env = _tool_env(taken, journal)
                if not late:
                    # Files and commands run now, each result kept at once: if this
                    # worker dies before the turn is recorded, the retry reuses them.
                    registry, tools = taken.registry, taken.tools
                    run_side_effects(taken.agent_turn, completion, registry=registry, tools=tools, journal=journal)
    except ProviderError as exc:
        # A call cut off by a deadline fails for the deadline's reason.
        if not taken.stopped():
            do_fail_step(step.pk, str(exc), step.attempt)
        return None
    if late or taken.stopped():
        return None
    return completion


def _tool_env(taken: _Turn, journal: DjangoToolJournal) -> ToolEnv:
    """What the tools of an answer's calls get (tool_host.tool_env), with the
    turn's ``journal``, whether service-backed calls become tasks of their own
    (runs/actions/tool_tasks.py), and what is left under maxToolCalls, which
    decides whether any call runs."""
    step, options = taken.step, taken.spec.options
    env = tool_env(step.run, step, taken.uow)
    env.journal = journal
    env.defer = options.tool_execution == "tasks"
    env.tool_call_cap = options.max_tool_calls
    env.tool_calls_made = ToolCall.objects.filter(step=step, counted=True).count()
    return env


def _record_answer(taken: _Turn, completion: Completion, router: MessageRouter) -> None:
    """Record the model's answer in one transaction with the run's lock, and
    apply what follows it (_after_answer): the general path, for every turn
    that is not the usual last one (_last_turn_in_one_trip)."""
    step, uow = taken.step, taken.uow
    with transaction.atomic():
        # Record the turn, with the run's lock: if another worker recorded it
        # first (our lease had expired and the turn was handed on), this one yields.
        if not _record_turn(step, taken.number):
            return
        # The turn's events and messages go in together, in one statement on PostgreSQL.
        with uow:
            uow.mark_locked()  # by _record_turn
            try:
                result = apply_completion(
                    taken.agent_turn,
                    taken.request,
                    completion,
                    taken.inbox,
                    router=router,
                    registry=taken.registry,
                    tools=taken.tools,
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
                unread, state = last_turn.save(step, result.transcript, tokens, last_turn.completion(result.output))
                taken.check_budget_after_commit()
                if state is not None:
                    _completed_by_last_turn(step, result.output, uow, state)
                    return
            else:
                # A turn that continues queues the next (_next_turn below): marked with it.
                unread = save_turn(step, result, next_turn_queued=result.status == "continue")
                taken.check_budget_after_commit()
            _after_answer(step, taken.number, result, unread, uow, router)


def _record_turn(step: Step, turn: int) -> int:
    """Record turn ``turn`` of ``step`` under the run's lock (the turn's
    first statement): how many rows it changed (0: another worker recorded
    it). A queued mark left by a duplicate of this turn (a resume while it
    ran) goes: what follows the turn sets it again if it queues another."""
    return store().record_turn(step, turn)


def _last_turn_in_one_trip(
    taken: _Turn, completion: Completion, rows: list[StepRow] | None
) -> tuple[bool, Eager | None]:
    """Record the usual last turn (an answer, no tool call, no mail read, no
    repeat-until loop to decide next) in one round trip on PostgreSQL
    (runs/store/last_turn.py), and say whether it was, with the step this worker
    takes the first turn of next (see do_step_turn). False, having written
    nothing, when it does not apply or mail arrived meanwhile: the general
    path (_record_answer) takes the turn then.

    With the run's step ``rows`` known (and no budget or timeout to check
    first), the step this completion starts (scheduling.eager_successor) is
    started and claimed in the same round trip: a chain's next step costs
    no transaction of its own. Where what it starts needs the run's lock (a
    cap binds, steps may be added: scheduling.known_start), the write keeps
    its transaction open and decides under the lock it took
    (scheduling.schedule with ``locked``), instead of a pass of its own after
    commit."""
    step, spec = taken.step, taken.spec
    if completion.tool_calls or taken.inbox or is_empty(completion):
        return False, None  # an empty answer is no last turn: the model gets a hint, or the step fails
    unlocked = decided_from_rows(spec, step)
    # A repeat-until loop's step: what follows is its loop's to decide. (A
    # workflow decided from rows has no such loop: no step is in one.)
    if not unlocked and repeat_loop_of(step.step_id) is not None:
        return False, None
    events = ListSink()
    # No mail to drain, no tool call: the router routes nothing, and needs
    # neither the run's limits nor its resume rule.
    router = MessageRouter(DjangoMailboxStore(step.run_id), events)
    result = apply_completion(
        taken.agent_turn,
        taken.request,
        completion,
        taken.inbox,
        router=router,
        registry=taken.registry,
        tools=taken.tools,
    )
    events.emit(_step_end(step, result.output))
    now = timezone.now()
    tokens = (result.prompt_tokens, result.completion_tokens)
    turn_written = (
        step,
        taken.number,
        result.transcript,
        tokens,
        last_turn.completion(result.output),
        [(e, now) for e in events.events],
    )
    outputs = {step.step_id: result.output}
    # A run with a budget or a timeout is checked after each turn commits
    # (enforce_budget_after_commit): a successor started with the turn would
    # run past it. Its successor starts after that check, as any other's does.
    limits = taken.limits.checked_after_commit
    start = known_start(spec, rows, step.step_id) if unlocked and not limits else None
    if not limits and (not unlocked or (start is not None and start.needs_run_lock)):
        return _last_turn_deciding_under_lock(turn_written, taken.owner, outputs)
    return _last_turn_starting_successor(taken, turn_written, outputs, rows, start, unlocked)


def _last_turn_starting_successor(
    taken: _Turn,
    turn_written: tuple,
    outputs: dict[str, str],
    rows: list[StepRow] | None,
    start: StartSteps | None,
    with_steps: bool,
) -> tuple[bool, Eager | None]:
    """Write a last turn (``turn_written``: last_turn.write's arguments) in
    one round trip, with the step ``start`` guesses it starts (started and
    claimed for this worker) when that is one step; then, committed, what
    else follows: the successor's turn this worker takes, or a scheduling
    pass. False, having written nothing, if the step has mail or the turn
    is no longer this worker's. ``outputs``: the finished step's, for the
    successor's prompt; ``with_steps``: the write reads the run's step rows
    back (decided_from_rows)."""
    step, owner = taken.step, taken.owner
    guess = eager_successor(rows, start) if rows is not None else None
    written = last_turn.write(
        *turn_written, with_steps=with_steps, successor=None if guess is None else successor(guess, owner)
    )
    if written is None:
        return False, None
    # Committed already: these run now.
    taken.check_budget_after_commit()
    if written.started is not None:
        started, seq = written.started
        broadcast(step.run_id, seq)  # after the turn's events
        # The successor was pending when the write read the rows: they came with it.
        assert written.steps is not None
        fresh = running(written.steps, started.step_id)
        if rows is None or not same_but(rows, fresh, step.step_id, started.step_id):
            # Other steps moved meanwhile: what else this completion starts
            # (a step that also waited for one that ended meanwhile) is queued.
            schedule(step.run_id, written.schedule, step, steps=fresh)
        return True, EagerTurn(started, outputs, fresh)
    broadcast(step.run_id, written.last_seq)
    follow = schedule(step.run_id, written.schedule, step, worker=owner, steps=written.steps)
    if isinstance(follow, EagerTurn):
        follow = follow._replace(outputs=outputs)
    return True, follow


def _last_turn_deciding_under_lock(
    turn_written: tuple, owner: str, outputs: dict[str, str]
) -> tuple[bool, Eager | None]:
    """Write a last turn (``turn_written``: last_turn.write's arguments) in
    a transaction that stays open under the run's lock the write takes,
    decide what the completion starts under it (scheduling.schedule, locked,
    from the run's flags and rows read with the write) and commit once: a
    capped run's completion costs one transaction, not two, and its rows
    are read once. Only for a run without a budget or a timeout (checked
    after the turn commits, before anything it starts). False, having
    written nothing, if the step has mail or the turn is no longer this
    worker's (see _last_turn_in_one_trip)."""
    step = turn_written[0]
    with transaction.atomic():
        written = last_turn.write(*turn_written, with_steps=True, commit=False)
        if written is None:
            return False, None
        NoticeAfterCommit(step.run_id).wrote(written.last_seq)
        follow = schedule(step.run_id, written.schedule, step, worker=owner, steps=written.steps, locked=True)
    if isinstance(follow, EagerTurn):
        follow = follow._replace(outputs=outputs)
    return True, follow


def _after_answer(step: Step, turn: int, result: TurnResult, unread: int, uow: UnitOfWork, router) -> None:
    """Apply what the state machine decides follows turn ``turn`` of
    ``step``, recorded with ``result`` and ``unread`` messages waiting
    (machine.TurnAnswered: agents/core/turns.py), in the turn's transaction."""
    run = step.run
    answered = TurnAnswered(
        step.step_id,
        result.status,
        result.error,
        unread,
        wake=_wake_count(step, run) if unread else None,
        tools=_tool_use(step, workflow_spec(run.workflow).options, result) if result.tool_calls else None,
    )
    for decision in machine.decide(machine.UNREAD, answered):
        match decision:
            case FailStep(error=error):
                uow.flush()  # the turn's events before the failure's, written at once
                do_fail_step(step.pk, error, step.attempt)
            case AwaitCalls(unread=True):
                # Tasks, a child run or a person answer its calls; the last
                # answer takes the next turn. A cancel that came while the
                # model answered would wait for that too: it is acted on now.
                stop_waiting_after_commit(run.pk, step.step_id)
            case NextTurn():
                _next_turn(step.pk, turn + 1)
            case WakeAgain():
                _wake_again(step, decision, unread, uow.sink)
                _next_turn(step.pk, turn + 1)
            case DropMail(reason=reason):
                router.close(step.step_id, _DROPS[reason])
            case CompleteStep():
                _complete_step(step, result.output, router)


_DROPS = {"max_wake_cycles": DropReason.MAX_WAKE_CYCLES, "hold_timeout": DropReason.HOLD_TIMEOUT}


def _tool_use(step: Step, options: WorkflowOptions, result: TurnResult) -> ToolUse:
    """The counts the tool caps are decided on, after a turn with tool
    calls. Bookkeeping calls (messaging) do not count against the caps; every
    call counts toward maxConsecutiveToolFailures (a model stuck on a
    failing call is stuck whatever the tool)."""
    cap = options.max_consecutive_tool_failures
    finished = ToolCall.objects.filter(step=step).exclude(status__in=ToolCall.PENDING)
    turns = finished.values("turn_id").annotate(last=Max("id"), worked=Count("id", filter=Q(ok=True)))
    return ToolUse(
        cap_exhausted=result.call_cap_exhausted,
        max_calls=options.max_tool_calls,
        run_calls=ToolCall.objects.filter(run_id=step.run_id, counted=True).count(),
        max_run_calls=options.max_run_tool_calls,
        recent_turns=tuple(turns.order_by("-last").values_list("worked", flat=True)[:cap]),
        max_failed_turns=cap,
    )


def _wake_count(step: Step, run: Run) -> WakeCount:
    """``step``'s wake cycles against its run's caps (Limits), and how long
    it has held its answer for mail (since its first wake cycle)."""
    limits = Limits.of(run)
    held_for = (timezone.now() - step.held_since).total_seconds() if step.held_since else 0.0
    return WakeCount(step.wake_cycles, limits.step_wake_cycles, held_for, limits.hold_timeout)


def _wake_again(step: Step, wake: WakeAgain, pending: int, sink) -> None:
    """Another turn for ``step`` to read the ``pending`` messages that
    arrived while it answered (a wake cycle), marked with its next turn."""
    now = timezone.now()
    store().wake_cycle(step, wake.cycle, now)
    sink.emit(RuntimeEvent.of(AgentWake(reason="messages", cycle=wake.cycle, messages=pending), step.step_id))
    if wake.warn:
        warning = MaxWakeCyclesWarning(cycle=wake.cycle, max=wake.max_cycles)
        sink.emit(RuntimeEvent.of(warning, step.step_id))


def _next_turn(step_pk: int, turn: int) -> None:
    """Queue turn ``turn`` after commit; the caller marked the step's row
    (``Step.turn_queued``) in the same transaction, with a write it makes anyway."""
    queue.send_after_commit(queue.RUN_STEP_TURN, step_pk, turn)


def _step_end(step: Step, output: str) -> RuntimeEvent:
    metrics.step_ended(step, Step.Status.COMPLETED)
    return RuntimeEvent.of(StepEnd(status=Step.Status.COMPLETED, output=output[:2000]), step.step_id)


def _completed_by_last_turn(step: Step, output: str, uow: UnitOfWork, state: tuple) -> None:
    """What follows a completion written by last_turn.save, which read the
    run's scheduling ``state`` with it."""
    uow.sink.emit(_step_end(step, output))
    uow.flush()  # before a loop's events, written at once
    if after_step_terminal(step):
        schedule_after_commit(step.run_id)  # a loop moved on: the state is stale
    else:
        schedule_after_commit(step.run_id, state, finished=step)


def _complete_step(step: Step, output: str, router: MessageRouter) -> None:
    """End a step that answered while messages still waited for it (past its
    wake cycles or hold timeout, they were dropped): the usual completion,
    with nothing unread, is written by last_turn.save."""
    router.sink.emit(_step_end(step, output))
    last_turn.complete(step, output)
    router.close(step.step_id)
    if after_step_terminal(step):
        schedule_after_commit(step.run_id)  # a loop moved on
    else:
        schedule_after_commit(step.run_id, finished=step)
