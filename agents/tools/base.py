"""Tools: declared once with a pydantic argument model, gated by role.

The registry, not the prompt, decides who may call what: a coordinator that
asks for a worker tool (or the reverse) gets an error result and nothing runs.
Bad arguments come back to the model as an error result it can repair; they
never raise out of the step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from agents.events import EventSink
from agents.router import MessageRouter
from agents.tools.errors import RetryHint, example_input, failure_text

Role = Literal["coordinator", "step"]


class ToolError(Exception):
    """A tool refused the call; the message goes back to the model."""


@dataclass
class ToolContext:
    """What an executing tool may touch. ``finalized`` collects finalize()."""

    run_id: str
    step_id: str
    role: Role
    tool_call_id: str
    router: MessageRouter
    sink: EventSink
    finalized: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    roles: frozenset[Role]
    run: Callable[[ToolContext, Any], str]
    toolset: str = "builtin"
    service: str = "zenweb"
    tags: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        """``<service>.<toolset>.<tool>``, as in Goa-AI's tool catalogs."""
        return f"{self.service}.{self.toolset}.{self.name}"

    def catalog_entry(self) -> dict[str, Any]:
        """This tool in tool_schemas.json's shape. Every tool returns text to
        the model for now, so the result schema is a string."""
        return {
            "id": self.id,
            "service": self.service,
            "toolset": self.toolset,
            "title": self.name.replace("_", " ").capitalize(),
            "description": self.description,
            "tags": list(self.tags),
            "payload": {"name": self.args_model.__name__, "schema": self.args_model.model_json_schema()},
            "result": {"name": "Text", "schema": {"type": "string"}},
            "server_data": [],
        }

    def schema(self) -> dict[str, Any]:
        """The function-tool schema sent to the model."""
        parameters = self.args_model.model_json_schema()
        parameters.pop("title", None)
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }


@dataclass(frozen=True)
class ToolOutcome:
    text: str
    ok: bool
    arguments: dict[str, Any] | None = None


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def names(self) -> list[str]:
        return sorted(self._tools)

    def catalog(self) -> dict[str, Any]:
        """Every tool, grouped as tool_schemas.json expects: ``{"tools": [...]}``."""
        return {"tools": [tool.catalog_entry() for tool in sorted(self._tools.values(), key=lambda t: t.id)]}

    def for_role(self, role: Role, requested: Iterable[str] = ()) -> list[Tool]:
        """The tools an agent of ``role`` gets: the role's defaults plus the
        requested ones the role may use. A step agent gets ``send_message``
        unless it declares a tool of that name itself."""
        chosen = [t for t in self._tools.values() if role in t.roles and t.name in DEFAULTS[role]]
        for name in requested:
            tool = self._tools.get(name)
            if tool and role in tool.roles and tool not in chosen:
                chosen.append(tool)
        return chosen

    def call(self, ctx: ToolContext, name: str, raw_arguments: str, allowed: list[Tool]) -> ToolOutcome:
        """Run one tool call. Every failure comes back as a ToolOutcome whose
        text carries a retry hint; nothing here raises into the step."""
        # Both the agent's tool list and the tool's own roles must allow it,
        # so a caller passing the wrong list still cannot cross roles.
        tool = next((t for t in allowed if t.name == name and ctx.role in t.roles), None)
        if tool is None:
            known = self._tools.get(name)
            why = f"tool {name!r} is not available to the {ctx.role}" if known else f"unknown tool {name!r}"
            available = ", ".join(t.name for t in allowed)
            hint = RetryHint("invalid_call", "replan", question=f"Which of these tools fits: {available}?")
            return ToolOutcome(failure_text(f"{why}. Available tools: [{available}]", hint), ok=False)
        try:
            data = json.loads(raw_arguments or "{}")
        except json.JSONDecodeError as exc:
            hint = RetryHint(
                "invalid_call", "correct_call", prior_input=raw_arguments, example_input=example_input(tool.args_model)
            )
            return ToolOutcome(failure_text(f"arguments for {name} are not valid JSON: {exc}", hint), ok=False)
        try:
            args = tool.args_model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in errors)
            hint = RetryHint(
                "invalid_call",
                "correct_call",
                fields=sorted({".".join(str(p) for p in err["loc"]) for err in errors if err["loc"]}),
                prior_input=data,
                example_input=example_input(tool.args_model),
            )
            return ToolOutcome(
                failure_text(f"invalid arguments for {name}: {problems}", hint),
                ok=False,
                arguments=data if isinstance(data, dict) else None,
            )
        try:
            return ToolOutcome(tool.run(ctx, args), ok=True, arguments=args.model_dump())
        except ToolError as exc:
            hint = RetryHint("domain_rejection", "replan", prior_input=args.model_dump())
            return ToolOutcome(failure_text(str(exc), hint), ok=False, arguments=args.model_dump())


# Tools every agent of a role gets without asking for them.
DEFAULTS: dict[Role, frozenset[str]] = {
    "coordinator": frozenset({"forward_to_agent", "narrate", "finalize"}),
    "step": frozenset({"send_message"}),
}
