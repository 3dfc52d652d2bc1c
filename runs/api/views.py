"""The JSON API's operations, on a django-ninja router: parsed with a schema,
an action called, answered with a schema.

Access rules are the dashboard's: runs and commands are seen by their owner
and staff, approvals by people with the approve permission, registering
workflows is for staff. Who is calling (auth.py) and how a refusal is
answered (errors.py) are the API's (app.py).
"""

from __future__ import annotations

from typing import Any

from django.db.models import F, Q
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import Query, Router, Status
from pydantic import BaseModel

from agents.handler import CoordinatorResult, CoordinatorSelection
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
from runs.actions.catalog import InputError
from runs.actions.commands import do_command
from runs.actions.forks import do_fork_run
from runs.actions.offers import NotOffered
from runs.api import bodies
from runs.api import schemas as s
from runs.api.auth import Requirement, callers
from runs.api.errors import ApiError
from runs.api.links import CANCELLED_RUN, COMMAND_LINKS, PENDING_APPROVALS, RUN_LINKS
from runs.api.rate_limits import check_command_rate
from runs.api.waiting import result_within
from runs.models import Approval, Command, Run


def _approves(user: Any) -> bool:
    return user.has_perm(PERMISSION)


def _is_staff(user: Any) -> bool:
    return user.is_staff


SHAPES: dict[str, type[BaseModel]] = {
    "COORDINATOR_SELECTION": CoordinatorSelection,
    "COORDINATOR_RESULT": CoordinatorResult,
}

# by_alias keeps the "_type" alias on COORDINATOR_RESULTs.
router = Router(by_alias=True)

Invalid = s.InvalidRequest | s.Error
RUNNING = "Its run is under way (`running`): GET its `url` (or `Location`) for the answer."
MARKDOWN = {"content": {"text/markdown": {"schema": {"type": "string"}}}}


@router.post(
    "/commands",
    url_name="command-create",
    summary="Answer a command: select a workflow and start a run",
    response={(201, 202): s.CommandOut, 400: Invalid, (401, 403, 413, 429): s.Error},
    openapi_extra={
        "responses": {
            201: MARKDOWN | {"links": COMMAND_LINKS, "description": "The command's answer, final."},
            202: MARKDOWN | {"links": {"ReadCommand": COMMAND_LINKS["ReadCommand"]}, "description": RUNNING},
        }
    },
)
def command_create(
    request: HttpRequest, response: HttpResponse, payload: s.CommandRequest, query: Query[s.CommandQuery]
) -> Any:
    """Answer a command: 202 with `status: "running"` and the command's `url`
    while the run it started is under way, 201 once the answer is final (at
    once for a command that started nothing). `?wait=N` holds the answer
    up to N seconds for the run to end. `?format=markdown` or
    `Accept: text/markdown`: as Markdown."""
    check_command_rate(request)
    try:
        command = do_command(payload.command, user=request.user, mode=payload.mode, context=payload.context)
    except TooManyRuns as exc:
        raise ApiError(429, str(exc), retry_after=exc.retry_after) from None
    return _command_answer(request, response, command, query, final_status=201)


@router.get(
    "/commands/{int:command_id}",
    url_name="command-detail",
    summary="A command and its current COORDINATOR_RESULT",
    response={200: s.CommandOut, 400: Invalid, (401, 404): s.Error},
    openapi_extra={"responses": {200: MARKDOWN}},
)
def command_detail(request: HttpRequest, response: HttpResponse, command_id: int, query: Query[s.CommandQuery]) -> Any:
    """A command with its result as it stands now (its run may have moved
    on); `?wait=N` holds the answer up to N seconds while it is `running`."""
    commands = Command.objects.select_related("run__workflow")
    if not request.user.is_staff:
        commands = commands.filter(created_by_id=request.user.pk)
    command = commands.filter(pk=command_id).first()
    if command is None:
        raise ApiError(404, f"command {command_id} not found")
    return _command_answer(request, response, command, query, final_status=200)


@router.get(
    "/schemas/{name}",
    url_name="shape-schema",
    auth=None,
    summary="The JSON Schema of a handler shape (COORDINATOR_SELECTION, COORDINATOR_RESULT)",
    response={200: dict[str, Any], 400: Invalid, 404: s.Error},
)
def shape_schema(request: HttpRequest, name: str) -> dict[str, Any]:
    """The JSON Schema of COORDINATOR_SELECTION (what the handler's model
    answers) or COORDINATOR_RESULT (what a command is answered), public."""
    shape = SHAPES.get(name)
    if shape is None:
        raise ApiError(404, f"no schema {name!r}: there are {', '.join(SHAPES)}")
    return shape.model_json_schema(by_alias=True)


@router.get(
    "/runs",
    url_name="run-list",
    summary="Visible runs, newest first",
    response={200: s.RunPage, 400: Invalid, 401: s.Error},
)
def run_list(request: HttpRequest, query: Query[s.RunListQuery]) -> s.RunPage:
    """Visible runs, newest first, a page at a time (`before` the last id seen)."""
    runs = visible_runs(request.user).order_by("-pk")
    if query.status:
        runs = runs.filter(status=query.status)
    if query.workflow:
        runs = runs.filter(workflow__name=query.workflow)
    if query.before:
        runs = runs.filter(pk__lt=query.before)
    page, next_url = bodies.page(request, runs, query.limit)
    return s.RunPage(runs=[bodies.run_summary(request, run) for run in page], next=next_url)


@router.get(
    "/runs/{int:run_id}",
    url_name="run-detail",
    summary="A run with steps, claims, approvals, result and events",
    response={200: s.RunDetail, 400: Invalid, (401, 404): s.Error},
    openapi_extra={"responses": {200: {"links": RUN_LINKS}}},
)
def run_detail(request: HttpRequest, run_id: int, query: Query[s.RunDetailQuery]) -> s.RunDetail:
    """A run with its steps, claims, approvals, result, and its events after `after`."""
    return bodies.run_detail(request, _run_for(request, run_id), query.after)


@router.post(
    "/runs/{int:run_id}/cancel",
    url_name="run-cancel",
    summary="Cancel a run",
    response={200: s.CancelOut, 409: s.CancelOut, (401, 403, 404, 413): s.Error},
    exclude_none=True,
    openapi_extra={"responses": {200: {"links": CANCELLED_RUN}}},
)
def run_cancel(request: HttpRequest, run_id: int) -> Status:
    """Cancel a run: 200 with its status, 409 if it had already ended."""
    run = _run_for(request, run_id)
    refusal = control_refusal(request.user, run, "cancel")
    if refusal:
        raise ApiError(403, refusal)
    cancelled = do_cancel_run(run.pk, f"cancelled by {request.user.get_username()}")
    run.refresh_from_db()
    body = s.CancelOut(id=run.pk, status=run.status, cancelled=cancelled)
    if not cancelled:
        body.error = f"run {run.pk} already ended {run.status}"
    return Status(200 if cancelled else 409, body)


@router.post(
    "/runs/{int:run_id}/fork",
    url_name="run-fork",
    summary="Fork a run at a step",
    response={201: s.RunSummary, 400: Invalid, (401, 403, 404, 409, 413, 429): s.Error},
)
def run_fork(request: HttpRequest, response: HttpResponse, run_id: int, payload: s.ForkRequest) -> Status:
    """Start a new run forked from this one, which has ended, at `step`: the
    steps before it reuse this run's results (no model or tool is called for
    them again); `step` and what follows run again. 201 with the new run and
    its URL in `Location`; 409 while this run is under way; 403 where the
    caller may not start runs of its workflow version."""
    parent = _run_for(request, run_id)
    if not parent.is_terminal:
        raise ApiError(409, f"run {parent.pk} is {parent.status}: only a run that has ended can be forked")
    try:
        run = do_fork_run(
            parent, payload.step, user=request.user, instructions=payload.instructions, inputs=payload.inputs
        )
    except TooManyRuns as exc:
        raise ApiError(429, str(exc), retry_after=exc.retry_after) from None
    except NotOffered as exc:
        raise ApiError(403, str(exc)) from None
    except InputError as exc:
        raise ApiError(400, str(exc)) from None
    response["Location"] = bodies.run_url(request, run)
    return Status(201, bodies.run_summary(request, run))


@router.get(
    "/approvals",
    url_name="approval-list",
    auth=callers(Requirement(_approves, "the approvals queue needs the approve permission")),
    summary="Approvals by status (approvers only)",
    response={200: s.ApprovalList, 400: Invalid, (401, 403): s.Error},
    openapi_extra={"responses": {200: {"links": PENDING_APPROVALS}}},
)
def approval_list(request: HttpRequest, query: Query[s.ApprovalListQuery]) -> s.ApprovalList:
    """Approvals with a status (pending by default), a page at a time (`before`
    the last id seen): pending oldest first, others latest decided first."""
    do_lapse_expired()
    pending = query.status == Approval.Status.PENDING
    approvals = bodies.approvals().filter(status=query.status)
    if query.before:
        approvals = approvals.filter(_listed_after(query.before, pending=pending))
    if pending:
        approvals = approvals.order_by("created", "pk")
    else:
        approvals = approvals.order_by(F("decided_at").desc(nulls_last=True), "-pk")
    page, next_url = bodies.page(request, approvals, query.limit)
    return s.ApprovalList(approvals=[bodies.approval(a) for a in page], next=next_url)


@router.post(
    "/approvals/{int:approval_id}/decide",
    url_name="approval-decide",
    auth=callers(Requirement(_approves, "deciding approvals needs the approve permission (runs.decide_approval)")),
    summary="Approve or reject, with a reason (approvers only)",
    response={200: s.ApprovalOut, 400: Invalid, (401, 403, 404, 409, 413): s.Error},
)
def approval_decide(request: HttpRequest, approval_id: int, payload: s.DecideRequest) -> s.ApprovalOut:
    """Approve or reject, with a reason: 200 with the approval's new state, 409 if refused."""
    try:
        do_decide(approval_id, request.user, payload.decision, payload.reason, payload.arguments_hash)
    except Approval.DoesNotExist:
        raise ApiError(404, f"approval {approval_id} not found") from None
    except ApprovalError as exc:
        raise ApiError(409, str(exc)) from None
    return bodies.approval(bodies.approvals().get(pk=approval_id))


@router.post(
    "/workflows",
    url_name="workflow-register",
    auth=callers(Requirement(_is_staff, "registering workflows is for staff")),
    summary="Register workflow YAML as a new version (staff only)",
    response={
        (200, 201): s.WorkflowOut,
        400: s.InvalidRequest | s.Error | s.InvalidWorkflow,
        (401, 403, 413): s.Error,
    },
    openapi_extra={"responses": {200: {"description": "The YAML equals the latest version, which is kept."}}},
)
def workflow_register(request: HttpRequest, payload: s.WorkflowRequest) -> Status:
    """Register workflow YAML as the next version of its name: 201, or 200
    if it equals the latest version (kept, nothing created); 400 lists
    every problem."""
    try:
        workflow, created = do_register_workflow(payload.yaml, payload.source, from_file=False)
    except WorkflowValidationError as exc:
        problems = [
            s.WorkflowProblem(file=p.source, line=p.line, field=p.field, message=p.message) for p in exc.problems
        ]
        return Status(400, s.InvalidWorkflow(problems=problems))
    return Status(201 if created else 200, s.WorkflowOut(name=workflow.name, version=workflow.version, created=created))


def _command_answer(
    request: HttpRequest, response: HttpResponse, command: Command, query: s.CommandQuery, *, final_status: int
) -> Any:
    """``command``'s answer (held up to ``query.wait`` seconds while it is
    running): ``final_status``, or from a POST 202 while it is running, with
    the command's URL in ``Location``."""
    result = result_within(command, query.wait)
    status = 202 if result.status == "running" and final_status == 201 else final_status
    url = request.build_absolute_uri(reverse("api:command-detail", kwargs={"command_id": command.pk}))
    if status == 202:
        response["Location"] = url
    if _wants_markdown(request, query):
        iteration = Command.objects.filter(created_by=command.created_by, created__lte=command.created).count()
        text = result.to_markdown(iteration)
        markdown = HttpResponse(text, status=status, content_type="text/markdown; charset=utf-8")
        if status == 202:
            markdown["Location"] = url
        return markdown
    run = command.run
    body = s.CommandOut(
        id=command.pk,
        url=url,
        text=command.text,
        mode=command.mode,
        status=result.status,
        created=command.created,
        result=result,
        run=s.RunLink(id=run.pk, status=run.status, url=bodies.run_url(request, run)) if run else None,
        compact_catalog=command.compact_catalog,
    )
    return Status(status, body)


def _wants_markdown(request: HttpRequest, query: s.FormatQuery) -> bool:
    """`?format=markdown`, or `Accept: text/markdown` when no format is given."""
    if query.format is not None:
        return query.format == "markdown"
    return "text/markdown" in request.headers.get("Accept", "")


def _run_for(request: HttpRequest, run_id: int) -> Run:
    try:
        return access_run(request.user, run_id)
    except Run.DoesNotExist:
        raise ApiError(404, f"run {run_id} not found") from None


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
