"""The coordinator extends the system (agents/tools/builtin/extending.py):
a workflow it registers, a tool it proposes, a person's decision on that
tool, and the approved tools later runs' agents get.

Only a run in code mode may do either. A created tool is stored with who
created it (the run and the person who started it) and waits for a
``new_tool`` approval that shows its spec and its example's output; its
request outlives the run (a run's end lapses its other approvals), and it
is offered to agents only once approved (``created_tool_named``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.events.tool_events import ToolCreated, ToolRegistered, WorkflowCreated
from agents.redaction import Redactor
from agents.router import COORDINATOR
from agents.runner import ToolEnv
from agents.spec import WorkflowValidationError
from agents.tools import Tool, ToolCallMeta, ToolContext, ToolError
from agents.tools.builtin.created import ToolSpec, created_tool
from agents.tools.builtin.extending import RegisteredWorkflow, example_key, examples_to_try, try_example
from agents.tools.builtin.shell import CommandRun
from runs.actions.approval_requests import ApprovalAsked, request_approval
from runs.actions.catalog import do_register_workflow, known_tool_roles, workflow_spec
from runs.models import Approval, CreatedTool, Run, Workflow
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork


def mode_refusal(run: Run, tool: str) -> None:
    """Raise the refusal of ``tool`` in a run that is not in code mode."""
    if run.mode != Run.Mode.CODE:
        raise ToolError(
            f"refused: {tool} works in code mode only, and run {run.pk} is in {run.mode} mode; "
            "finish without it, or say that a person must ask for this in code mode",
            kind="domain_rejection",
            action="finish",
        )


def create_workflow(run: Run, ctx: ToolContext, yaml_text: str, sink: EventSink) -> RegisteredWorkflow:
    """Register ``yaml_text`` as the next version of its workflow, offered
    in the catalog, created by ``run``; a ToolError with every problem found."""
    mode_refusal(run, "create_workflow")
    try:
        with transaction.atomic():  # a refusal below leaves no version behind
            workflow, created = do_register_workflow(
                yaml_text, f"run {run.pk} (create_workflow)", from_file=False, by_run=run
            )
            _refuse_dropped_gates(workflow)
    except WorkflowValidationError as exc:
        raise ToolError(
            f"refused: the workflow is not valid:\n{exc}", kind="invalid_call", action="correct_call", fields=["yaml"]
        ) from None
    if created:
        made = WorkflowCreated(workflow=workflow.name, version=workflow.version, tool_call_id=ctx.meta.tool_call_id)
        sink.emit(RuntimeEvent.of(made, ctx.step_id))
    return RegisteredWorkflow(name=workflow.name, version=workflow.version, created=created)


def _refuse_dropped_gates(workflow: Workflow) -> None:
    """Raise if ``workflow`` drops an approval gate its previous version has
    (``destructive``, tools on ``approvals``): a model may not lift a gate a
    person set; a person registers such a version."""
    previous = (
        Workflow.objects.filter(name=workflow.name, version__lt=workflow.version)
        .exclude(offer=Workflow.Offer.AD_HOC)
        .order_by("-version")
        .first()
    )
    if previous is None:
        return
    before, after = workflow_spec(previous), workflow_spec(workflow)
    dropped = sorted(set(before.approvals) - set(after.approvals))
    gates = (["destructive: true"] if before.destructive and not after.destructive else []) + [
        f"approvals: {name}" for name in dropped
    ]
    if gates:
        raise ToolError(
            f"refused: {workflow.name} v{workflow.version} would drop what v{previous.version} needs a "
            f"person's approval for ({', '.join(gates)}); keep it, or ask a person to register this version",
            kind="domain_rejection",
            action="replan",
            fields=["yaml"],
        )


def check_new_tool(run: Run, spec: ToolSpec) -> None:
    """Raise the refusal of a tool ``run`` may not create: not in code mode,
    a spec holding a known secret value, or a name an agent listing it
    would find taken (a builtin, an MCP server's, a workflow's, another
    created tool's)."""
    mode_refusal(run, "create_tool")
    data = spec.model_dump(mode="json")
    if Redactor(settings.ZENWEB_SECRET_VALUES).data(data) != data:
        raise ToolError(
            "refused: the spec holds a secret value of this server; a tool never carries one",
            kind="domain_rejection",
            action="replan",
        )
    if spec.name in known_tool_roles():
        taken = "a tool agents already get by that name (builtin, MCP server or workflow)"
    elif CreatedTool.objects.filter(CreatedTool.HOLDS_NAME, name=spec.name).exists():
        taken = "a tool created before, approved or waiting for approval"
    else:
        return
    raise ToolError(
        f"refused: {spec.name!r} is {taken}; choose another name",
        kind="invalid_call",
        action="correct_call",
        fields=["spec.name"],
    )


def propose_tool(run: Run, ctx: ToolContext, spec: ToolSpec, tried: tuple[int, str], sink: EventSink) -> int:
    """Store the tool with its example's exit code and output (``tried``)
    and ask a person to approve it; the approval's id."""
    # As every tool outcome is: no known secret reaches the approver or the
    # page (check_new_tool refused a spec that holds one).
    exit_code, output = tried[0], Redactor(settings.ZENWEB_SECRET_VALUES).text(tried[1])
    data = spec.model_dump(mode="json")
    tool = store().create_created_tool(
        {
            "name": spec.name,
            "spec": data,
            "example_exit_code": exit_code,
            "example_output": output,
            "run": run,
            "created_by": run.created_by,
            "tool_call_id": ctx.meta.tool_call_id,
        }
    )
    shown: dict[str, Any] = {"spec": data, "example_exit_code": exit_code, "example_output": output}
    asked = ApprovalAsked(
        kind=Approval.Kind.NEW_TOOL,
        what=f"new tool {spec.name}",
        why=(
            f"the coordinator of run {run.pk} created it; approved, agents of later runs that list "
            f"{spec.name} run its command in the sandbox"
        ),
        subject={"new_tool": shown},
        arguments=shown,
        step_id=ctx.step_id,
    )
    approval = request_approval(run, asked, sink)
    store().link_created_tool_approval(tool.pk, approval)
    proposed = ToolCreated(
        name=spec.name, approval_id=approval.pk, example_exit_code=exit_code, tool_call_id=ctx.meta.tool_call_id
    )
    sink.emit(RuntimeEvent.of(proposed, ctx.step_id))
    return approval.pk


def settle_created_tool(approval: Approval, status: str, uow: UnitOfWork) -> None:
    """A person decided on a ``new_tool`` approval (or it lapsed): the tool
    is registered for later runs, or refused. Nothing in its run waits on it."""
    tool = CreatedTool.objects.filter(approval=approval).first()
    if tool is None:
        return
    store().settle_created_tool(tool, status)
    decided = ToolRegistered(name=tool.name, approval_id=approval.pk, status=status)
    uow.sink.emit(RuntimeEvent.of(decided, approval.step_id))


def try_examples(run_id: int, env: ToolEnv, calls: Iterable[tuple[str, str]]) -> dict[str, CommandRun | ToolError]:
    """Run the examples of a coordinator round's create_tool calls (name,
    raw arguments) that check_new_tool lets through, before the round is
    recorded: no lock is held while they run. By ``example_key``."""
    specs = examples_to_try(calls)
    if not specs:
        return {}
    run = Run.objects.get(pk=run_id)
    meta = ToolCallMeta(str(run_id), f"{run_id}/{COORDINATOR}", f"{COORDINATOR}/example", "")
    ctx = ToolContext(
        meta=meta,
        step_id=COORDINATOR,
        role="coordinator",
        router=None,  # type: ignore[arg-type]  # an example sends nothing
        sink=None,  # type: ignore[arg-type]  # and emits nothing
        workspace=env.workspace,
        destructive_approved=env.destructive_approved,
        sandbox=env.sandbox,
    )
    tried: dict[str, CommandRun | ToolError] = {}
    for spec in specs:
        try:
            check_new_tool(run, spec)
        except ToolError:
            continue  # refused when the round is recorded, without running
        tried[example_key(spec)] = try_example(ctx, spec)
    return tried


def created_tool_named(name: str) -> Tool | None:
    """The approved created tool of this name, as agents that list it get it."""
    row = CreatedTool.objects.filter(name=name, status=CreatedTool.Status.APPROVED).order_by("-created").first()
    return created_tool(ToolSpec.model_validate(row.spec)) if row is not None else None


def approved_tool_names() -> list[str]:
    return sorted(set(CreatedTool.objects.filter(status=CreatedTool.Status.APPROVED).values_list("name", flat=True)))
