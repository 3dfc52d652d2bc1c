"""The JSON API views: parse with a schema, call an action, answer with a schema.

Access rules are the dashboard's: runs and commands are seen by their owner
and staff, approvals by people with the approve permission, registering
workflows is for staff.
"""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Count, F, Model, Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.http import urlencode

from agents.handler import CoordinatorResult
from agents.hidden_characters import escape_hidden, escaped_in, hidden_in
from agents.spec import WorkflowValidationError
from runs.actions import (
    TooManyRuns,
    access_run,
    control_refusal,
    do_cancel_run,
    do_register_workflow,
    visible_runs,
)
from runs.actions.approvals import PERMISSION, ApprovalError, do_decide, do_lapse_expired
from runs.actions.budgets import totals_of
from runs.actions.command_results import coordinator_result
from runs.actions.commands import do_command
from runs.api import schemas as s
from runs.api.auth import api_view
from runs.api.schemas import ApiError, dump, parse_body, parse_query
from runs.models import Approval, ApprovalDecision, Command, Run

T = TypeVar("T", bound=Model)


@api_view("POST")
def command_create(request: HttpRequest) -> HttpResponse:
    """Answer a command: 201 with the COORDINATOR_RESULT and the run it started, if any."""
    as_markdown = _wants_markdown(request)
    body = parse_body(request, s.CommandRequest)
    try:
        command = do_command(body.command, user=request.user, mode=body.mode)
    except TooManyRuns as exc:
        raise ApiError(429, str(exc), retry_after=exc.retry_after) from None
    return _command_response(request, command, status=201, as_markdown=as_markdown)


@api_view("GET")
def command_detail(request: HttpRequest, command_id: int) -> HttpResponse:
    """A command with its result as it stands now (its run may have moved on)."""
    as_markdown = _wants_markdown(request)
    commands = Command.objects.select_related("run__workflow")
    if not request.user.is_staff:
        commands = commands.filter(created_by=request.user)
    command = commands.filter(pk=command_id).first()
    if command is None:
        raise ApiError(404, f"command {command_id} not found")
    return _command_response(request, command, status=200, as_markdown=as_markdown)


@api_view("GET")
def run_list(request: HttpRequest) -> JsonResponse:
    """Visible runs, newest first, a page at a time (``before`` the last id seen)."""
    query = parse_query(request, s.RunListQuery)
    runs = visible_runs(request.user).order_by("-pk")
    if query.status:
        runs = runs.filter(status=query.status)
    if query.workflow:
        runs = runs.filter(workflow__name=query.workflow)
    if query.before:
        runs = runs.filter(pk__lt=query.before)
    page, next_url = _page(request, runs, query.limit)
    body = s.RunPage(runs=[_run_summary(request, run) for run in page], next=next_url)
    return JsonResponse(dump(body))


@api_view("GET")
def run_detail(request: HttpRequest, run_id: int) -> JsonResponse:
    """A run with its steps, claims, approvals, result, and its events after ``after``."""
    query = parse_query(request, s.RunDetailQuery)
    run = _get_run_for_user(request, run_id)
    # One more than a page, to tell whether more follow.
    events = list(run.events.filter(seq__gt=query.after).order_by("seq")[: s.MAX_EVENTS + 1])
    more = len(events) > s.MAX_EVENTS
    events = events[: s.MAX_EVENTS]
    steps = list(run.steps.order_by("position", "pk"))
    body = s.RunDetail(
        **_run_summary(request, run).model_dump(),
        inputs=run.inputs,
        command=run.command,
        steps=[
            s.StepOut(
                step_id=step.step_id,
                kind=step.kind,
                agent=step.agent,
                status=step.status,
                turns=step.turns,
                prompt_tokens=step.prompt_tokens,
                completion_tokens=step.completion_tokens,
                output=step.output,
                error=step.error,
            )
            for step in steps
        ],
        claims=[
            s.ClaimOut(
                id=c.pk,
                step_id=c.step_id,
                claim=c.claim,
                confidence=c.confidence,
                source_name=c.source_name,
                source_domain=c.source_domain,
                url=c.url,
                title=c.title,
                source_type=c.source_type,
                source_ref=c.source_ref,
                ttl=c.ttl,
                expires_at=c.expires_at,
            )
            for c in run.claims.all()
        ],
        approvals=[
            s.ApprovalBrief(
                id=a.pk, status=a.status, kind=a.kind, step_id=a.step_id, what=a.what, hidden_characters=_hidden(a)
            )
            for a in run.approvals.order_by("created", "pk")
        ],
        tool_calls=[
            s.ToolCallOut(
                id=c.pk,
                step_id=c.step.step_id,
                tool_call_id=c.tool_call_id,
                name=c.name,
                status=c.status,
                ok=c.ok,
                error_kind=c.error_kind,
                attempts=c.attempts,
                duration_ms=c.duration_ms,
                started=c.started,
                finished=c.finished,
            )
            for c in run.tool_calls.select_related("step").order_by("id")
        ],
        tokens=s.TokenTotals.model_validate(totals_of(steps).as_data()),
        coordinator_result=coordinator_result(run),
        events=[s.EventOut(seq=e.seq, type=e.type, step_id=e.step_id, data=e.data, created=e.created) for e in events],
        next_after=events[-1].seq if events else query.after,
        more=more,
    )
    return JsonResponse(dump(body))


@api_view("POST")
def run_cancel(request: HttpRequest, run_id: int) -> JsonResponse:
    """Cancel a run: 200 with its status, 409 if it had already ended."""
    run = _get_run_for_user(request, run_id)
    refusal = control_refusal(request.user, run, "cancel")
    if refusal:
        raise ApiError(403, refusal)
    cancelled = do_cancel_run(run.pk, f"cancelled by {request.user.get_username()}")
    run.refresh_from_db()
    body = s.CancelOut(id=run.pk, status=run.status, cancelled=cancelled)
    if not cancelled:
        body.error = f"run {run.pk} already ended {run.status}"
    return JsonResponse(dump(body, exclude_none=True), status=200 if cancelled else 409)


@api_view("GET")
def approval_list(request: HttpRequest) -> JsonResponse:
    """Approvals with a status (pending by default), a page at a time (``before``
    the last id seen): pending oldest first, others latest decided first."""
    _check_approver(request, "the approvals queue needs the approve permission")
    query = parse_query(request, s.ApprovalListQuery)
    do_lapse_expired()
    pending = query.status == Approval.Status.PENDING
    approvals = _approvals().filter(status=query.status)
    if query.before:
        approvals = approvals.filter(_listed_after(query.before, pending=pending))
    if pending:
        approvals = approvals.order_by("created", "pk")
    else:
        approvals = approvals.order_by(F("decided_at").desc(nulls_last=True), "-pk")
    page, next_url = _page(request, approvals, query.limit)
    body = s.ApprovalList(approvals=[_approval(a) for a in page], next=next_url)
    return JsonResponse(dump(body))


@api_view("POST")
def approval_decide(request: HttpRequest, approval_id: int) -> JsonResponse:
    """Approve or reject, with a reason: 200 with the approval's new state, 409 if refused."""
    _check_approver(request, "deciding approvals needs the approve permission (runs.decide_approval)")
    body = parse_body(request, s.DecideRequest)
    try:
        do_decide(approval_id, request.user, body.decision, body.reason, body.arguments_hash)
    except Approval.DoesNotExist:
        raise ApiError(404, f"approval {approval_id} not found") from None
    except ApprovalError as exc:
        raise ApiError(409, str(exc)) from None
    return JsonResponse(dump(_approval(_approvals().get(pk=approval_id))))


@api_view("POST")
def workflow_register(request: HttpRequest) -> JsonResponse:
    """Register workflow YAML as the next version of its name: 201, or 200
    if it equals the latest version (kept, nothing created); 400 lists
    every problem."""
    if not request.user.is_staff:
        raise ApiError(403, "registering workflows is for staff")
    body = parse_body(request, s.WorkflowRequest)
    try:
        workflow, created = do_register_workflow(body.yaml, body.source, from_file=False)
    except WorkflowValidationError as exc:
        problems = [
            s.WorkflowProblem(file=p.source, line=p.line, field=p.field, message=p.message) for p in exc.problems
        ]
        return JsonResponse(dump(s.InvalidWorkflow(problems=problems)), status=400)
    answer = s.WorkflowOut(name=workflow.name, version=workflow.version, created=created)
    return JsonResponse(dump(answer), status=201 if created else 200)


@api_view("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", public=True)
def not_found(request: HttpRequest, rest: str) -> JsonResponse:
    """Any other URL under /api/, such as an id that is not a number: the
    JSON 404 the schema promises, not Django's HTML page."""
    raise ApiError(404, f"no such API resource: {request.path}")


def _wants_markdown(request: HttpRequest) -> bool:
    """``?format=markdown``, or ``Accept: text/markdown`` when no format is given."""
    query = parse_query(request, s.FormatQuery)
    if query.format is not None:
        return query.format == "markdown"
    return "text/markdown" in request.headers.get("Accept", "")


def _command_response(request: HttpRequest, command: Command, *, status: int, as_markdown: bool) -> HttpResponse:
    run = command.run
    result = coordinator_result(run, command.text) if run else CoordinatorResult.model_validate(command.result)
    if as_markdown:
        iteration = Command.objects.filter(created_by=command.created_by, created__lte=command.created).count()
        return HttpResponse(result.to_markdown(iteration), status=status, content_type="text/markdown; charset=utf-8")
    body = s.CommandOut(
        id=command.pk,
        text=command.text,
        mode=command.mode,
        status=result.status,
        created=command.created,
        result=result,
        run=s.RunLink(id=run.pk, status=run.status, url=_run_url(request, run)) if run else None,
        compact_catalog=command.compact_catalog,
    )
    return JsonResponse(dump(body), status=status)


def _get_run_for_user(request: HttpRequest, run_id: int) -> Run:
    try:
        return access_run(request.user, run_id)
    except Run.DoesNotExist:
        raise ApiError(404, f"run {run_id} not found") from None


def _run_url(request: HttpRequest, run: Run) -> str:
    return request.build_absolute_uri(reverse("runs:detail", args=[run.pk]))


def _run_summary(request: HttpRequest, run: Run) -> s.RunSummary:
    return s.RunSummary(
        id=run.pk,
        url=_run_url(request, run),
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


def _page(request: HttpRequest, rows: QuerySet[T], limit: int) -> tuple[list[T], str | None]:
    """A page of ``rows`` and the URL of the next one (this query string with
    ``before`` the page's last id), if more follow."""
    # One more than a page, to tell whether more follow.
    page = list(rows[: limit + 1])
    if len(page) <= limit:
        return page, None
    page = page[:limit]
    params = {key: request.GET[key] for key in request.GET} | {"before": page[-1].pk}
    return page, request.build_absolute_uri(f"{request.path}?{urlencode(params)}")


def _listed_after(approval_id: int, *, pending: bool) -> Q:
    """What follows approval ``approval_id`` in approval_list's order (by
    created, or latest decided first), wherever that approval is now: neither
    time changes once set, so a decision between two pages skips nothing."""
    cursor = Approval.objects.filter(pk=approval_id).values("created", "decided_at").first()
    if cursor is None:
        raise ApiError(400, "invalid request", [{"field": "before", "message": f"no approval {approval_id}"}])
    if pending:
        created = cursor["created"]
        return Q(created__gt=created) | Q(created=created, pk__gt=approval_id)
    decided = cursor["decided_at"]
    if decided is None:  # listed after every decided one
        return Q(decided_at=None, pk__lt=approval_id)
    return Q(decided_at__lt=decided) | Q(decided_at=decided, pk__lt=approval_id) | Q(decided_at=None)


def _check_approver(request: HttpRequest, message: str) -> None:
    if not request.user.has_perm(PERMISSION):
        raise ApiError(403, message)


def _approvals():
    return (
        Approval.objects.select_related("run__workflow", "requested_by")
        .prefetch_related("decisions__user")
        .annotate(approved=Count("decisions", filter=Q(decisions__decision=ApprovalDecision.Decision.APPROVE)))
    )


def _approval(approval: Approval) -> s.ApprovalOut:
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
        approvals=approval.approved,
        decisions=[
            s.DecisionOut(user=d.user.get_username(), decision=d.decision, reason=d.reason, created=d.created)
            for d in approval.decisions.all()
        ],
        hidden_characters=_hidden(approval),
        escaped=s.ApprovalEscaped(
            what=escape_hidden(approval.what),
            why=escape_hidden(approval.why),
            arguments=escaped_in(approval.arguments),
            actions=escaped_in(approval.actions),
        ),
    )


def _hidden(approval: Approval) -> bool:
    """Whether what a person reads of ``approval`` holds a hidden character."""
    return hidden_in([approval.what, approval.why, approval.arguments, approval.actions])
