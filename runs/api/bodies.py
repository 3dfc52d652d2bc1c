"""What the API answers, built from the records: a run (in a list, or with
its steps, claims, approvals, tool calls and events), an approval, a page
of either."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Count, Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.http import urlencode

from agents.hidden_characters import escape_hidden, escaped_in, hidden_in
from runs.actions.budgets import totals_of
from runs.actions.command_results import coordinator_result
from runs.api import schemas as s
from runs.models import Approval, ApprovalDecision, Command, Event, Run, ToolCall

T = TypeVar("T", bound=Model)


def run_url(request: HttpRequest, run: Run) -> str:
    return request.build_absolute_uri(reverse("runs:detail", args=[run.pk]))


def run_summary(request: HttpRequest, run: Run) -> s.RunSummary:
    return s.RunSummary(
        id=run.pk,
        url=run_url(request, run),
        workflow=run.workflow.name,
        version=run.workflow.version,
        status=run.status,
        mode=run.mode,
        created_by=run.created_by.get_username() if run.created_by else None,
        created=run.created,
        started=run.started,
        finished=run.finished,
        error=run.error,
        result=run.result,
        stuck=run.stuck_reason if run.status in (Run.Status.PENDING, Run.Status.RUNNING) else "",
    )


def run_detail(request: HttpRequest, run: Run, after: int) -> s.RunDetail:
    """The run with its events after ``after``, at most MAX_EVENTS of them."""
    # One more than a page, to tell whether more follow.
    events = list(run.events.filter(seq__gt=after).order_by("seq")[: s.MAX_EVENTS + 1])
    more = len(events) > s.MAX_EVENTS
    events = events[: s.MAX_EVENTS]
    steps = list(run.steps.order_by("position", "pk"))
    return s.RunDetail(
        **run_summary(request, run).model_dump(),
        inputs=run.inputs,
        command=run.command,
        steps=[s.StepOut.model_validate(step, from_attributes=True) for step in steps],
        claims=[s.ClaimOut.model_validate(claim, from_attributes=True) for claim in run.claims.all()],
        approvals=[
            s.ApprovalBrief(
                id=a.pk, status=a.status, kind=a.kind, step_id=a.step_id, what=a.what, hidden_characters=hidden(a)
            )
            for a in run.approvals.order_by("created", "pk")
        ],
        tool_calls=[_tool_call(call) for call in run.tool_calls.select_related("step").order_by("id")],
        tokens=s.TokenTotals.model_validate(totals_of(steps).as_data()),
        coordinator_result=coordinator_result(run, Command.objects.filter(run=run).first()),
        events=[_event(e) for e in events],
        next_after=events[-1].seq if events else after,
        more=more,
    )


def _tool_call(call: ToolCall) -> s.ToolCallOut:
    return s.ToolCallOut(
        id=call.pk,
        step_id=call.step.step_id,
        tool_call_id=call.tool_call_id,
        name=call.name,
        status=call.status,
        ok=call.ok,
        error_kind=call.error_kind,
        attempts=call.attempts,
        duration_ms=call.duration_ms,
        started=call.started,
        finished=call.finished,
    )


def _event(event: Event) -> s.EventOut:
    return s.EventOut(seq=event.seq, type=event.type, step_id=event.step_id, data=event.data, created=event.created)


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
    return s.ApprovalOut(
        id=approval.pk,
        run=approval.run_id,
        workflow=approval.run.workflow.name,
        status=approval.status,
        kind=approval.kind,
        step_id=approval.step_id,
        what=approval.what,
        why=approval.why,
        arguments=approval.arguments,
        actions=approval.actions,
        arguments_hash=approval.arguments_hash,
        requested_by=approval.requested_by.get_username() if approval.requested_by else None,
        created=approval.created,
        expires_at=approval.expires_at,
        decided_at=approval.decided_at,
        reason=approval.reason,
        required_approvals=approval.required_approvals,
        approvals=approval.approved,  # type: ignore[attr-defined]
        decisions=[
            s.DecisionOut(user=d.user.get_username(), decision=d.decision, reason=d.reason, created=d.created)
            for d in approval.decisions.all()
        ],
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
