"""Agent-as-tool: a catalog workflow offered to other agents as a tool.

Calling it starts a child run of the workflow (through the ToolHost); the
call waits, and the child's final result becomes the tool result
(``WorkflowToolResult``: the child run, its workflow and its result). The tool's
arguments are the workflow's declared inputs, with their types and defaults.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from agents.spec import WorkflowSpec
from agents.tools.base import Role, Tool, ToolContext
from agents.tools.builtin.result_models import WorkflowToolResult
from agents.tools.results import ToolAnswer

_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
# Who may call a workflow offered as a tool: steps, never the coordinator.
WORKFLOW_TOOL_ROLES: frozenset[Role] = frozenset({"step"})


class _WorkflowArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def workflow_tool(spec: WorkflowSpec) -> Tool:
    """The tool ``spec.tool`` declares. Raises ValueError if it declares none."""
    if spec.tool is None:
        raise ValueError(f"workflow {spec.name!r} is not exposed as a tool")
    fields: dict[str, Any] = {}
    for name, declared in spec.inputs.items():
        annotation = _TYPES[declared.type]
        if declared.required:
            fields[name] = (annotation, Field(description=declared.description))
        else:
            fields[name] = (annotation | None, Field(default=declared.default, description=declared.description))
    model = create_model(f"{_camel(spec.tool.name)}Args", __base__=_WorkflowArgs, **fields)
    workflow = spec.name

    def start(ctx: ToolContext, args: BaseModel) -> ToolAnswer:
        inputs = {key: value for key, value in args.model_dump().items() if value is not None}
        child = ctx.require_host().start_child_run(ctx, workflow, inputs)
        return ToolAnswer(f"started run {child} of workflow {workflow}", pending=True, child_run_id=child)

    description = spec.tool.description or spec.description or f"Run the {workflow} workflow."
    return Tool(
        spec.tool.name,
        f"{description} Runs as a separate workflow; its final result is this tool's result.",
        model,
        WORKFLOW_TOOL_ROLES,
        start,
        toolset="workflows",
        inline=True,
        tags=("agent-as-tool",),
        result_model=WorkflowToolResult,
    )


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
