"""Run budgets (options.budget): tokens, tool calls and wall time. A run past
any of them ends failed with the budget named. Time a run spent waiting for a
person's approval is not wall time it spent."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Sum
from django.utils import timezone

from runs.actions.catalog import workflow_spec
from runs.models import Run


def budget_breach(run: Run) -> str | None:
    """Why ``run`` is over its budget, or None."""
    budget = workflow_spec(run.workflow).options.budget
    if budget.tokens is not None:
        used = run.steps.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
        tokens = (used["p"] or 0) + (used["c"] or 0)
        if tokens > budget.tokens:
            return f"budget exceeded: {tokens:,} tokens used, the budget is {budget.tokens:,} (options.budget.tokens)"
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


def working_time(run: Run) -> timedelta:
    """Time since the run started, less the time its approvals were pending."""
    now = timezone.now()
    end = run.finished or now
    waited = timedelta()
    for created, decided in run.approvals.filter(created__gte=run.started).values_list("created", "decided_at"):
        waited += (decided or now) - created
    return max(timedelta(), end - run.started - waited)


def do_enforce_budget(run_id: int) -> bool:
    """Fail the run if it is over budget; True if it was."""
    from runs.actions.lifecycle import do_fail_run

    run = Run.objects.select_related("workflow").get(pk=run_id)
    if run.status != Run.Status.RUNNING:
        return False
    breach = budget_breach(run)
    if breach:
        do_fail_run(run.pk, breach)
    return breach is not None
