"""What the API answers, built from the records: a run (in a list, or with
its steps, claims, approvals, tool calls and events), an approval, a page
of either."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, TypeVar

from django.db.models import Count, Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import urlencode
from pydantic import BaseModel

from agents.hidden_characters import escape_hidden, escaped_in, hidden_in
from runs.actions.budgets import totals_of
from runs.actions.command_results import coordinator_result
from runs.actions.costs import cost_of, model_calls
from runs.api import schemas as s
from runs.models import Approval, ApprovalDecision, Command, Run, Step

T = TypeVar("T", bound=Model)
B = TypeVar("B", bound=BaseModel)


def copied(body: type[B], record: object, **computed: Any) -> B:
    """``body`` with each field read from ``record``'s attribute of the same
    name, but for the ``computed`` ones given."""
    fields = {name: getattr(record, name) for name in body.model_fields if name not in computed}
    return body.model_validate(fields | computed)


def run_url(request: HttpRequest, run: Run) -> str:
    return request.build_absolute_uri(reverse("runs:detail", args=[run.pk]))


def run_summary(request: HttpRequest, run: Run) -> s.RunSummary:
    return copied(
        s.RunSummary,
        run,
        url=run_url(request, run),
        workflow=run.workflow.name,
        version=run.workflow.version,
        created_by=run.created_by.get_username() if run.created_by else None,
        stuck=run.stuck_reason if run.status in (Run.Status.PENDING, Run.Status.RUNNING) else "",
        forked_from=run.forked_from_id,
    )


def step_out(step: Step, cost: str | None) -> s.StepOut:
    return copied(s.StepOut, step, reused=step.reused_from_id is not None, cost=cost)


def run_detail(request: HttpRequest, run: Run, after: int) -> s.RunDetail:
    """The run with its events after ``after``, at most MAX_EVENTS of them."""
    # One more than a page, to tell whether more follow.
    events = list(run.events.filter(seq__gt=after).order_by("seq")[: s.MAX_EVENTS + 1])
    more = len(events) > s.MAX_EVENTS
    events = events[: s.MAX_EVENTS]
    steps = list(run.steps.order_by("position", "pk"))
    cost = cost_of(run, steps)
    return s.RunDetail(
        **run_summary(request, run).model_dump(),
        inputs=run.inputs,
        command=run.command,
        steps=[step_out(step, _decimal(cost.by_step[step.pk])) for step in steps],
        claims=[s.ClaimOut.model_validate(claim, from_attributes=True) for claim in run.claims.all()],
        approvals=[
            copied(s.ApprovalBrief, a, hidden_characters=hidden(a)) for a in run.approvals.order_by("created", "pk")
        ],
        tool_calls=[
            copied(s.ToolCallOut, call, step_id=call.step.step_id)
            for call in run.tool_calls.select_related("step").order_by("id")
        ],
        tokens=s.TokenTotals.model_validate(totals_of(steps).as_data()),
        cost=_decimal(cost.total),
        unpriced_models=cost.unpriced,
        model_calls=[
            s.ModelCallOut.model_validate(vars(call) | {"cost": _decimal(call.cost)}) for call in model_calls(run)
        ],
        coordinator_result=coordinator_result(run, Command.objects.filter(run=run).first()),
        events=[s.EventOut.model_validate(e, from_attributes=True) for e in events],
        next_after=events[-1].seq if events else after,
        more=more,
    )


def _decimal(cost: Decimal | None) -> str | None:
    return None if cost is None else f"{cost:.6f}"


def page(request: HttpRequest, rows: QuerySet[T], limit: int) -> tuple[list[T], str | None]:
    """A page of ``rows`` and the URL of the next one (this query string with
    ``before`` the page's last id), if more follow."""
    # One more than a page, to tell whether more follow.
    found = list(rows[: limit + 1])
    if len(found) <= limit:
        return found, None
    found = found[:limit]
    params = {key: request.GET[key] for key in request.GET} | {"before": found[-1].pk}
    return found, request.build_absolute_uri(f"{request.path}?{urlencode(params)}")


def approvals() -> QuerySet[Approval]:
    return (
        Approval.objects.select_related("run__workflow", "requested_by")
        .prefetch_related("decisions__user")
        .annotate(approved=Count("decisions", filter=Q(decisions__decision=ApprovalDecision.Decision.APPROVE)))
    )


def approval(approval: Approval) -> s.ApprovalOut:
    """An approval read through ``approvals()`` (its count of approvals annotated)."""
    return copied(
        s.ApprovalOut,
        approval,
        run=approval.run_id,
        workflow=approval.run.workflow.name,
        requested_by=approval.requested_by.get_username() if approval.requested_by else None,
        approvals=approval.approved,  # type: ignore[attr-defined]
        decisions=[copied(s.DecisionOut, d, user=d.user.get_username()) for d in approval.decisions.all()],
        hidden_characters=hidden(approval),
        escaped=s.ApprovalEscaped(
            what=escape_hidden(approval.what),
            why=escape_hidden(approval.why),
            arguments=escaped_in(approval.arguments),
            actions=escaped_in(approval.actions),
        ),
    )


def hidden(approval: Approval) -> bool:
    """Whether what a person reads of ``approval`` holds a hidden character."""
    return hidden_in([approval.what, approval.why, approval.arguments, approval.actions])
