"""The coordinator extends the system: ``create_workflow`` and ``create_tool``.

Both are the coordinator's, in code mode only (the run store refuses them in
chat mode, as it refuses a name already taken). ``create_workflow`` checks
its YAML as ``validate_workflow`` does and registers it as the next version
of its name, offered in the catalog. ``create_tool`` tries the new tool once
on its example in run_shell's sandbox (for at most MAX_EXAMPLE_SECONDS,
before the coordinator's round is recorded: ``try_example``); a failing
example is refused, else
the tool waits for a person's approval, which shows its spec and the
example's output, and only then do later runs' agents that list it get it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.tools.base import Tool, ToolContext, ToolError
from agents.tools.builtin.created import ToolSpec, run_spec
from agents.tools.builtin.shell import CommandRun
from agents.tools.results import ToolAnswer

MAX_WORKFLOW_CHARS = 100_000
# The longest an example may run (before the coordinator's round is
# recorded, or, for a host that tried none, while it is).
MAX_EXAMPLE_SECONDS = 20
# How much of the example's output the approver is shown, and the model told.
MAX_EXAMPLE_OUTPUT_CHARS = 4_000


class CreateWorkflowArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    yaml: str = Field(min_length=1, max_length=MAX_WORKFLOW_CHARS, description="The workflow, as catalog YAML.")


class CreateToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    spec: ToolSpec


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisteredWorkflow(_Result):
    name: str
    version: int = Field(ge=1)
    created: bool = Field(description="False: the text equals the latest version, which is kept.")


class CreateWorkflowResult(_Result):
    """The workflow as registered: offered in the catalog as its name's latest version."""

    result: RegisteredWorkflow


class ProposedTool(_Result):
    name: str
    status: str = Field(description="waiting_for_approval: later runs get it once a person approves it.")
    approval_id: int
    example_exit_code: int
    example_output: str = Field(max_length=MAX_EXAMPLE_OUTPUT_CHARS + 100)


class CreateToolResult(_Result):
    """The tool as proposed: its example ran, and it waits for a person's approval."""

    result: ProposedTool


@runtime_checkable
class ExtensionHost(Protocol):
    """What the run store does for these tools (zenweb's ``runs`` app);
    each method raises ToolError with the reason it refuses."""

    def create_workflow(self, ctx: ToolContext, yaml_text: str) -> RegisteredWorkflow:
        """Register the workflow for the catalog, by this run."""
        ...

    def check_new_tool(self, ctx: ToolContext, spec: ToolSpec) -> None:
        """Refuse a tool this run may not create (chat mode, a name taken)."""
        ...

    def propose_tool(self, ctx: ToolContext, spec: ToolSpec, example_exit_code: int, example_output: str) -> int:
        """Store the tool and ask a person to approve it; the approval's id."""
        ...

    def tried_example(self, spec: ToolSpec) -> CommandRun | ToolError | None:
        """How ``spec``'s example ran before the coordinator's round was
        recorded (``try_example``, outside the run's lock); None if it did not."""
        ...


def example_key(spec: ToolSpec) -> str:
    """What tells one spec's example from another's."""
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)


def examples_to_try(calls: Iterable[tuple[str, str]]) -> list[ToolSpec]:
    """The specs of the valid create_tool calls among ``calls`` (name, raw arguments)."""
    specs = []
    for name, arguments in calls:
        if name == "create_tool":
            try:
                specs.append(CreateToolArgs.model_validate_json(arguments or "{}").spec)
            except ValidationError:
                continue  # the call is refused when the round is recorded
    return specs


def try_example(ctx: ToolContext, spec: ToolSpec) -> CommandRun | ToolError:
    """Run ``spec``'s command once on its example, for at most MAX_EXAMPLE_SECONDS."""
    try:
        return run_spec(ctx, spec, spec.example_input, timeout=min(spec.timeout, MAX_EXAMPLE_SECONDS))
    except ToolError as exc:
        return exc


def _host(ctx: ToolContext) -> ExtensionHost:
    host = ctx.require_host()
    if not isinstance(host, ExtensionHost):
        raise ToolError("this run store cannot register workflows or tools", kind="unavailable", action="finish")
    return host


def _create_workflow(ctx: ToolContext, args: CreateWorkflowArgs) -> ToolAnswer:
    registered = _host(ctx).create_workflow(ctx, args.yaml)
    return ToolAnswer(registered.model_dump())


def _create_tool(ctx: ToolContext, args: CreateToolArgs) -> ToolAnswer:
    host = _host(ctx)
    spec = args.spec
    host.check_new_tool(ctx, spec)
    tried = host.tried_example(spec) or try_example(ctx, spec)
    if isinstance(tried, ToolError):
        raise ToolError(
            f"refused: the example of {spec.name} did not run to its end (an example has at most "
            f"{MAX_EXAMPLE_SECONDS} s): {tried}",
            cause=tried,
        )
    output = _bounded(tried.text)
    if tried.exit_code != 0:
        raise ToolError(
            f"refused: the example of {spec.name} failed; fix the command or the example.\n{output}",
            kind="domain_rejection",
            action="correct_call",
            fields=["spec.command", "spec.example_input"],
        )
    approval = host.propose_tool(ctx, spec, tried.exit_code, output)
    proposed = ProposedTool(
        name=spec.name,
        status="waiting_for_approval",
        approval_id=approval,
        example_exit_code=tried.exit_code,
        example_output=output,
    )
    return ToolAnswer(proposed.model_dump())


def _bounded(text: str) -> str:
    if len(text) <= MAX_EXAMPLE_OUTPUT_CHARS:
        return text
    half = MAX_EXAMPLE_OUTPUT_CHARS // 2
    return f"{text[:half]}\n[{len(text) - MAX_EXAMPLE_OUTPUT_CHARS:,} characters left out]\n{text[-half:]}"


CREATE_WORKFLOW = Tool(
    "create_workflow",
    "Register a new workflow (or the next version of one) in the catalog, from its YAML, checked as "
    "validate_workflow checks it. Code mode only. Later commands and runs may use it.",
    CreateWorkflowArgs,
    frozenset({"coordinator"}),
    _create_workflow,
    toolset="extending",
    tags=("extending",),
    result_model=CreateWorkflowResult,
    inline=True,
)

CREATE_TOOL = Tool(
    "create_tool",
    "Propose a new tool for later runs: a bash command that reads its input as JSON from $TOOL_INPUT. "
    "It runs once on example_input in the sandbox; if that succeeds, a person must approve it before "
    "agents that list it get it. Code mode only.",
    CreateToolArgs,
    frozenset({"coordinator"}),
    _create_tool,
    toolset="extending",
    tags=("extending",),
    result_model=CreateToolResult,
    inline=True,
    timeout=180,
)

EXTENDING_TOOLS = (CREATE_WORKFLOW, CREATE_TOOL)
