"""Tools a coordinator created (``create_tool``): a spec, and the tool it
becomes once a person approved it.

A created tool runs one fixed bash command in run_shell's sandbox, with
run_shell's limits, timeout and output cap. Its input reaches the command
only as data: the arguments, checked against the spec's JSON schema, are
the JSON text of the environment variable ``TOOL_INPUT``, never spliced
into the command line (``jq -r .city <<<"$TOOL_INPUT"``).
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agents.tools.base import Role, Tool, ToolContext, ToolError
from agents.tools.builtin.result_models import RunShellResult
from agents.tools.builtin.shell import MAX_COMMAND_CHARS, MAX_TIMEOUT, CommandRun, run_command
from agents.tools.mcp.schema import args_model
from agents.tools.results import ToolAnswer

# The variable a created tool's command reads its input from, as JSON.
INPUT_VARIABLE = "TOOL_INPUT"
# The most characters of JSON a created tool is given (an environment
# variable holds at most 128 KiB on Linux).
MAX_INPUT_CHARS = 32_000
MAX_SCHEMA_CHARS = 16_000
# Who may call a created tool: steps, as run_shell.
CREATED_TOOL_ROLES: frozenset[Role] = frozenset({"step"})
# A created tool's name: what OpenAI's function names allow, lowercase.
NAME_PATTERN = r"^[a-z][a-z0-9_]{2,63}$"


class ToolSpec(BaseModel):
    """What ``create_tool`` is given: a tool that runs ``command`` on its input."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="The tool's name: lowercase letters, digits and _.")
    description: str = Field(min_length=1, max_length=2_000, description="What the tool does, for the model.")
    input_schema: dict[str, Any] = Field(description="JSON schema of the tool's input: an object.")
    command: str = Field(
        min_length=1,
        max_length=MAX_COMMAND_CHARS,
        description=f"Bash command run in the sandbox; it reads the input as JSON from ${INPUT_VARIABLE}.",
    )
    example_input: dict[str, Any] = Field(description="An input the tool is tried on before a person approves it.")
    timeout: int = Field(default=30, ge=1, le=MAX_TIMEOUT, description="Seconds before a call is stopped.")

    @field_validator("input_schema")
    @classmethod
    def _a_schema_of_objects(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            raise ValueError(f"the schema is longer than {MAX_SCHEMA_CHARS:,} characters of JSON")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON schema: {exc.message}") from None
        if schema.get("type") != "object":
            raise ValueError('the input must be an object: give "type": "object" and its "properties"')
        return schema

    @model_validator(mode="after")
    def _example_fits(self) -> ToolSpec:
        # Checked as a call's arguments will be: the schema's patterns matched with RE2.
        try:
            args_model("ExampleArgs", self.input_schema).model_validate(self.example_input)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(root)"
            raise ValueError(f"example_input does not fit input_schema at {where}: {first['msg']}") from None
        return self


def input_data(arguments: dict[str, Any]) -> dict[str, str]:
    """The environment that carries ``arguments`` to the command; ToolError if too long."""
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    if len(text) > MAX_INPUT_CHARS:
        raise ToolError(
            f"the input is {len(text):,} characters of JSON; a created tool takes at most {MAX_INPUT_CHARS:,}",
            kind="invalid_call",
            action="correct_call",
        )
    return {INPUT_VARIABLE: text}


def run_spec(ctx: ToolContext, spec: ToolSpec, arguments: dict[str, Any], timeout: int | None = None) -> CommandRun:
    """Run ``spec``'s command on ``arguments`` in the run's sandbox and
    workspace, for ``timeout`` seconds (the spec's own if None)."""
    if ctx.workspace is None:
        raise ToolError(f"{spec.name} cannot run here: no workspace", kind="unavailable", action="finish")
    seconds = timeout or spec.timeout
    return run_command(ctx, spec.command, seconds, str(ctx.workspace), input_data(arguments))


def created_tool(spec: ToolSpec) -> Tool:
    """The tool an approved ``spec`` is: its arguments checked against its
    schema, its command run sandboxed with them as data."""
    model = args_model(f"Created_{spec.name}_Args", spec.input_schema)

    def run(ctx: ToolContext, args: Any) -> ToolAnswer:
        # Answered as run_shell answers: its exit code and output.
        return ToolAnswer(run_spec(ctx, spec, args.model_dump()).shell.model_dump(exclude_none=True))

    return Tool(
        spec.name,
        f"{spec.description} (A tool created in a run and approved by a person; it runs in the sandbox.)",
        model,
        CREATED_TOOL_ROLES,
        run,
        toolset="created",
        tags=("execution", "destructive-capable", "created"),
        # Its own timeout stops the command; this one catches a stuck tool.
        timeout=spec.timeout + 30,
        result_model=RunShellResult,
    )
