"""A run's limits at run time: its budget (options.budget: tokens, tool calls,
wall time) and its timeout (options.timeout), a step's timeout (its own, else
options.stepTimeout); what limits a turn, the sweeper's step-timeout check,
and the budget check after a turn. A run past any of them ends failed with
the limit named. Time a run spent waiting for a person's approval or answer
is not wall time it spent (budgets.working_time), but it counts against its
timeout; time a step spent waiting for an answer does not count against its
step timeout (budgets.step_waited). What follows a deadline passing is the state machine's
(``machine.decide``, agents/core/gates.py): ``apply_deadline`` carries it out."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from agents import expansion
from agents.core import gates, machine
from agents.core.attempts import overdue, step_limit
from agents.spec import WorkflowOptions, WorkflowSpec
from agents.spec.lookup import step_at
from runs.actions.budgets import step_waited, token_totals, working_time
from runs.actions.catalog import workflow_spec
from runs.actions.costs import cost_of
from runs.actions.ending import end_run
from runs.actions.step_ends import do_fail_step
from runs.models import Run, Step


def has_run_limits(options: WorkflowOptions) -> bool:
    """Whether a run of a workflow with ``options`` has a budget or a timeout to enforce."""
    budget = options.budget
    return not (
        budget.tokens is None
        and budget.tool_calls is None
        and budget.wall_time is None
        and budget.cost is None
        and options.timeout is None
    )


def timeout_breach(run: Run, options: WorkflowOptions) -> str | None:
    """Why ``run`` is past options.timeout, or None (no query).

    The timeout is a deadline, like Temporal's workflow execution timeout:
    every second since the run started counts, approval waits included. That
    is what sets it apart from budget.wallTime, which leaves them out; with
    it, a run that waits for a person who never answers still ends."""
    if options.timeout is None or run.started is None:
        return None
    ran = ((run.finished or timezone.now()) - run.started).total_seconds()
    if ran < options.timeout:
        return None
    return f"run timed out: ran {ran:.1f}s, options.timeout is {options.timeout:g}s"


def run_deadline(run: Run, options: WorkflowOptions) -> float | None:
    """The Unix time options.timeout ends ``run``, or None."""
    if options.timeout is None or run.started is None:
        return None
    return run.started.timestamp() + options.timeout


def budget_breach(run: Run) -> str | None:
    """Why ``run`` is over its budget or past its timeout, or None."""
    options = workflow_spec(run.workflow).options
    timed_out = timeout_breach(run, options)
    if timed_out:
        return timed_out
    budget = options.budget
    if budget.tokens is not None:
        tokens = token_totals(run).all.total
        if tokens > budget.tokens:
            return f"budget exceeded: {tokens:,} tokens used, the budget is {budget.tokens:,} (options.budget.tokens)"
    if budget.cost is not None and (over := cost_breach(run, budget.cost)):
        return over
    if budget.tool_calls is not None:
        calls = run.tool_calls.filter(counted=True).count()
        if calls > budget.tool_calls:
            return (
                f"budget exceeded: {calls:,} tool calls made, the budget is {budget.tool_calls:,}"
                " (options.budget.toolCalls)"
            )
    if budget.wall_time is not None and run.started:
        spent = working_time(run)
        if spent.total_seconds() > budget.wall_time:
            return (
                f"budget exceeded: ran {spent.total_seconds():.1f}s, the budget is {budget.wall_time:g}s"
                " (options.budget.wallTime; approval waits excluded)"
            )
    return None


def cost_breach(run: Run, limit: float) -> str | None:
    """Why ``run``'s tokens are past options.budget.cost at the operator's
    prices, or None; a model without a price is a breach: its cost is unknown."""
    cost = cost_of(run, list(run.steps.only("step_id", "agent", "model", "prompt_tokens", "completion_tokens")))
    if cost.total is None:
        return (
            f"budget cannot be kept: no price for {', '.join(cost.unpriced)} in ZENWEB_MODEL_PRICES"
            " (options.budget.cost)"
        )
    if cost.total > Decimal(str(limit)):
        return f"budget exceeded: cost {cost.total:.6f}, the budget is {limit:g} (options.budget.cost)"
    return None


def enforce_budget_after_commit(run_id: int, spec: WorkflowSpec) -> None:
    if not has_run_limits(spec.options):
        return  # nothing to enforce: no query after every turn
    transaction.on_commit(lambda: do_enforce_budget(run_id))


def step_timeout_breach(step: Step, options: WorkflowOptions, own: float | None = None) -> str | None:
    """Why ``step`` is past its limit, or None (no query unless it ran that
    long): ``own``, the step's own ``timeout`` (zenflow's), else
    options.stepTimeout (agents/core/attempts.py).

    Counted from the start of the step's attempt, like Temporal's
    start-to-close timeout: what the step waits for counts (its tool tasks,
    a child run, a person's approval), as everything counts against the
    run's timeout, except the time it waited for a person to answer its
    questions (ask_person), which a wait of its own bounds
    (ZENWEB_ASK_PERSON_TIMEOUT)."""
    limit = step_limit(own, options.step_timeout)
    if limit is None or step.started is None:
        return None
    now = timezone.now()
    ran = (now - step.started).total_seconds()
    if overdue(step.step_id, ran, limit) is None:
        return None
    return overdue(step.step_id, ran, limit, step_waited(step, now))


def own_timeout(spec: WorkflowSpec, step: Step) -> float | None:
    """The step's own ``timeout`` in its workflow's ``spec``, or None."""
    found = step_at(spec, expansion.condition_path(step.step_id))
    return found.timeout if found is not None else None


class TurnLimits(NamedTuple):
    """What limits a step's turn: the Unix time the run's or the step's
    timeout ends it (None: neither is set, and the turn has no deadline to
    pass), and whether the run has a budget or a timeout to check after the
    turn commits (has_run_limits)."""

    deadline: float | None
    checked_after_commit: bool


def turn_limits(run: Run, step: Step, spec: WorkflowSpec) -> TurnLimits:
    """What limits ``step``'s turn in ``run``, of a workflow ``spec`` (see TurnLimits)."""
    return TurnLimits(turn_deadline(run, step, spec), has_run_limits(spec.options))


def turn_deadline(run: Run, step: Step, spec: WorkflowSpec) -> float | None:
    """The Unix time the run's or the step's timeout ends this turn, or None."""
    options = spec.options
    deadlines = [run_deadline(run, options)]
    limit = step_limit(own_timeout(spec, step), options.step_timeout)
    if limit is not None and step.started is not None:
        waited = step_waited(step, timezone.now())
        deadlines.append(step.started.timestamp() + limit.seconds + waited)
    return min((d for d in deadlines if d is not None), default=None)


def stopped_by_deadline(run: Run, step: Step, spec: WorkflowSpec) -> bool:
    """Fail the run (of a workflow ``spec``) if it is past options.timeout,
    else the step if it is past its own timeout or options.stepTimeout;
    True if either was."""
    options = spec.options
    reason = timeout_breach(run, options)
    if reason is not None:
        apply_deadline(gates.DeadlinePassed("run", reason), run.pk)
        return True
    reason = step_timeout_breach(step, options, own_timeout(spec, step))
    if reason is not None:
        apply_deadline(gates.DeadlinePassed("step", reason, step.step_id), run.pk, step.pk, step.attempt)
        return True
    return False


def do_enforce_step_timeouts(
    run_id: int, options: WorkflowOptions, own: Mapping[tuple[str, ...], float] | None = None
) -> int:
    """Fail the run's steps that are past their limit (the sweeper's check:
    a step can be stuck in a long model call, or wait for its tools): their
    own timeouts, ``own`` (agents.spec.lookup.own_timeouts), else
    options.stepTimeout; how many. A worker's turn that comes back later
    finds its step failed and records nothing."""
    own = own or {}
    limits = [seconds for seconds in (options.step_timeout, *own.values()) if seconds is not None]
    if not limits:
        return 0
    cutoff = timezone.now() - timedelta(seconds=min(limits))
    # Steps only: the coordinator lives as long as its run, and a loop as long as its iterations.
    late = Step.objects.filter(
        run_id=run_id, kind=Step.Kind.STEP, status=Step.Status.RUNNING, started__lt=cutoff
    ).order_by("position")
    failed = 0
    for step in late.only("pk", "step_id", "started", "attempt"):
        reason = step_timeout_breach(step, options, own.get(expansion.condition_path(step.step_id)))
        passed = gates.DeadlinePassed("step", reason or "", step.step_id)
        if reason is not None and apply_deadline(passed, run_id, step.pk, step.attempt):
            failed += 1
    return failed


def do_enforce_budget(run_id: int) -> bool:
    """Fail the run if it is over budget or past its timeout; True if it was."""
    # Called after every turn: a run without a budget costs one light query.
    light = Run.objects.select_related("workflow").only("workflow__id", "workflow__created").get(pk=run_id)
    if not has_run_limits(workflow_spec(light.workflow).options):
        return False
    run = Run.objects.select_related("workflow").get(pk=run_id)
    if run.status != Run.Status.RUNNING:
        return False
    breach = budget_breach(run)
    if breach:
        apply_deadline(gates.DeadlinePassed("run", breach), run.pk)
    return breach is not None


def apply_deadline(
    passed: gates.DeadlinePassed, run_id: int, step_pk: int | None = None, attempt: int | None = None
) -> bool:
    """Carry out what follows ``passed``: the run fails, or the step
    ``step_pk`` does, in its ``attempt`` (it may be retried; its failure
    policy follows a failure). False if it had ended already."""
    ended = False
    for decision in machine.decide(machine.UNREAD, passed):
        if isinstance(decision, machine.EndRun):
            end_run(run_id, decision)
            ended = True
        elif isinstance(decision, gates.FailStep) and step_pk is not None:
            ended = do_fail_step(step_pk, decision.error, attempt) or ended
    return ended
