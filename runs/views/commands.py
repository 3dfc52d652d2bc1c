"""The command box, a command's answer, and registering workflows."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from agents.handler import DEFAULT_BUDGET_TOKENS, CoordinatorResult
from agents.spec import WorkflowValidationError
from runs.actions.catalog import do_register_workflow, workflow_spec
from runs.actions.command_results import command_result
from runs.actions.commands import catalog_compaction, do_command, do_give_inputs
from runs.actions.lifecycle import TooManyRuns
from runs.actions.offers import offered_workflows
from runs.models import Command, Run
from runs.views.htmx_requests import HtmxHttpRequest
from runs.views.runs import too_many_runs

MAX_COMMAND_CHARS = 4000
MAX_YAML_CHARS = 200_000


@require_POST
def command_create(request: HtmxHttpRequest) -> HttpResponse:
    """Answer a command from the command box: a run page when it started one,
    else the coordinator's answer (unknown workflow, missing inputs, ...)."""
    text = request.POST.get("command", "").strip()
    mode = request.POST.get("mode", Run.Mode.CHAT)
    if not text or len(text) > MAX_COMMAND_CHARS:
        messages.error(request, f"command: say what to do, in at most {MAX_COMMAND_CHARS} characters")
        return redirect("runs:list")
    if mode not in Run.Mode.values:
        messages.error(request, f"mode: must be chat or code, not {mode!r}")
        return redirect("runs:list")
    # A clarification answered on a command's page names the workflow the person picked.
    chosen = request.POST.get("workflow") or None
    try:
        command = do_command(text, user=request.user, mode=mode, chosen=chosen)
    except TooManyRuns as exc:
        return too_many_runs(request, exc)
    return _answered(command)


def _answered(command: Command) -> HttpResponse:
    if command.run_id:
        return redirect("runs:detail", run_id=command.run_id)
    return redirect("runs:command", command_id=command.pk)


@require_POST
def command_inputs(request: HtmxHttpRequest, command_id: int) -> HttpResponse:
    """The inputs a command's answer asked for (``missing``), given in its
    page's form: the same workflow starts with them (``do_give_inputs``)."""
    earlier = _get_command_for_user(request, command_id)
    # A command with no answer stored (the field is nullable) asked for nothing.
    missing = (earlier.result or {}).get("missing") or []
    given = {name: request.POST.get(f"input-{name}", "").strip() for name in missing}
    empty = [name for name, value in given.items() if not value]
    if not missing or empty:
        messages.error(request, f"inputs: give a value for {', '.join(empty) or 'nothing: none is missing'}")
        return redirect("runs:command", command_id=earlier.pk)
    try:
        command = do_give_inputs(earlier, given, user=request.user)
    except TooManyRuns as exc:
        return too_many_runs(request, exc)
    return _answered(command)


@require_safe
def command_detail(request: HttpRequest, command_id: int) -> HttpResponse:
    command = _get_command_for_user(request, command_id)
    answer = _answer(command)
    return render(
        request,
        "runs/command.html",
        answer
        | {"compaction": catalog_compaction(command), "budget_tokens": DEFAULT_BUDGET_TOKENS}
        | _ways_on(command, answer["result"]),
    )


@require_safe
def command_live(request: HttpRequest, command_id: int) -> HttpResponse:
    """The command page's live region: its answer as it stands, asked for
    again every 2 s while it is ``running``."""
    command = _get_command_for_user(request, command_id)
    return render(request, "runs/partials/command_live.html", _answer(command))


def _answer(command: Command) -> dict:
    result = command_result(command)
    iteration = Command.objects.filter(created_by=command.created_by, created__lte=command.created).count()
    return {"command": command, "result": result, "markdown": result.to_markdown(iteration)}


def _ways_on(command: Command, result: CoordinatorResult) -> dict:
    """What the page offers a command that started nothing: a field for each
    input it lacks (with the input's description), and the mode a workflow
    refused for its mode runs in."""
    workflow = offered_workflows().get(result.workflow_selected or "") if not command.run_id else None
    if workflow is None:
        return {"missing_inputs": [], "other_mode": None}
    spec = workflow_spec(workflow)
    inputs = [(name, spec.inputs[name].description if name in spec.inputs else "") for name in result.missing]
    other_mode = spec.mode if result.status == "blocked" and spec.mode and spec.mode != command.mode else None
    return {"missing_inputs": inputs, "other_mode": other_mode}


@require_http_methods(["GET", "POST"])
def workflow_register(request: HttpRequest) -> HttpResponse:
    """Register a workflow from pasted YAML: every problem is listed with its
    line; a valid one becomes the next version of its name."""
    if not request.user.is_staff:
        raise PermissionDenied("registering workflows is for staff")
    problems = []
    yaml_text = request.POST.get("yaml", "")
    if request.method == "POST":
        if not yaml_text.strip():
            messages.error(request, "yaml: empty; paste a workflow's YAML")
        elif len(yaml_text) > MAX_YAML_CHARS:
            messages.error(
                request, f"yaml: {len(yaml_text):,} characters; paste a workflow of at most {MAX_YAML_CHARS:,}"
            )
        else:
            try:
                workflow, created = do_register_workflow(yaml_text, "<dashboard>", from_file=False)
            except WorkflowValidationError as exc:
                problems = exc.problems
            else:
                what = f"registered {workflow}" if created else f"{workflow} is unchanged"
                messages.success(request, what)
                return redirect("runs:catalog")
    return render(request, "runs/register.html", {"yaml": yaml_text, "problems": problems})


def _get_command_for_user(request: HttpRequest, command_id: int) -> Command:
    user = request.user
    if not user.is_authenticated:  # LoginRequiredMiddleware lets no one through without signing in
        raise Http404("No such command")
    commands = Command.objects.select_related("run__workflow")
    if not user.is_staff:
        commands = commands.filter(created_by=user)
    try:
        return commands.get(pk=command_id)
    except Command.DoesNotExist:
        raise Http404("No such command") from None
