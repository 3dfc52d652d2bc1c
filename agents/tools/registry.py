"""The tool registry: who may call what, and one tool call from raw model
arguments to the outcome the model and the run page see.

Every failure (an unknown or forbidden tool, arguments that are not JSON or
do not validate, a ToolError, a result that breaks the bounds contract, an
unexpected exception) comes back as a failed ToolOutcome whose text carries a
retry hint. Nothing here raises into the step.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from agents import bounded_json, telemetry
from agents.redaction import Redactor
from agents.tools.base import INJECTED, Role, Tool, ToolContext, ToolError
from agents.tools.errors import FailureKind, RetryHint, example_input, failure_text
from agents.tools.results import MAX_RESULT_CHARS, Artifact, Bounds, ToolAnswer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolOutcome:
    """What became of one call. ``text`` is what the model sees; ``arguments``
    are the validated arguments with injected values redacted; ``artifacts``
    are for people only."""

    text: str
    ok: bool
    arguments: dict[str, Any] | None = None
    error_kind: FailureKind | None = None
    bounds: Bounds | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    omitted: bool = False
    pending: bool = False
    child_run_id: str | None = None
    approval_id: str | None = None
    counted: bool = True
    # Deferred: the call was checked and will run as its own task.
    queued: bool = False


class ToolRegistry:
    """``secrets`` are values no outcome may carry: every call's result
    text, artifacts and arguments have them replaced by ``[redacted]``."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, max_result_chars: int = MAX_RESULT_CHARS, secrets: Iterable[str] = ()
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.max_result_chars = max_result_chars
        self.redactor = Redactor(secrets)
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def tools(self) -> list[Tool]:
        return sorted(self._tools.values(), key=lambda t: t.id)

    def catalog(self) -> dict[str, Any]:
        """Every tool, as tool_schemas.json has them: ``{"tools": [...]}``."""
        return {"tools": [tool.catalog_entry() for tool in self.tools()]}

    def for_role(self, role: Role, requested: Iterable[str] = ()) -> list[Tool]:
        """The tools an agent of ``role`` gets: the role's defaults plus the
        requested ones the role may use."""
        chosen = [t for t in self._tools.values() if role in t.roles and t.name in DEFAULTS[role]]
        for name in requested:
            tool = self._tools.get(name)
            if tool and role in tool.roles and tool not in chosen:
                chosen.append(tool)
        return chosen

    def call(self, ctx: ToolContext, name: str, raw_arguments: str, allowed: list[Tool]) -> ToolOutcome:
        """Run one tool call; every failure is an outcome with a retry hint.
        Known secrets are redacted from what it returns, before anything
        stores it or sends it to the model."""
        with telemetry.tool_span(name, ctx.meta.tool_call_id, ctx.run_id, ctx.step_id) as span:
            outcome = self._call(ctx, name, raw_arguments, allowed)
            telemetry.tool_outcome(
                span, ok=outcome.ok, pending=outcome.pending, queued=outcome.queued, error_kind=outcome.error_kind
            )
        if not self.redactor:
            return outcome
        redact = self.redactor
        return replace(
            outcome,
            text=redact.text(outcome.text),
            arguments=redact.data(outcome.arguments) if outcome.arguments is not None else None,
            artifacts=[replace(a, title=redact.text(a.title), data=redact.data(a.data)) for a in outcome.artifacts],
        )

    def _call(self, ctx: ToolContext, name: str, raw_arguments: str, allowed: list[Tool]) -> ToolOutcome:
        # Both the agent's tool list and the tool's own roles must allow it,
        # so a caller passing the wrong list still cannot cross roles.
        tool = next((t for t in allowed if t.name == name and ctx.role in t.roles), None)
        if tool is None:
            known = self._tools.get(name)
            why = f"tool {name!r} is not available to the {ctx.role}" if known else f"unknown tool {name!r}"
            available = ", ".join(t.name for t in allowed)
            question = f"Which of these tools fits: {available}?"
            hint = RetryHint("invalid_call", "replan", question=question, tool=name, why="tool_unavailable")
            return _failed(f"{why}. Available tools: [{available}]", hint, counted=not (known and known.bookkeeping))
        counted = not tool.bookkeeping
        data = _parsed(tool, raw_arguments, counted)
        if isinstance(data, ToolOutcome):
            return data
        spoofed = sorted(set(data) & set(tool.injected))
        # Interceptors: injected fields come from the context, whatever the model sent.
        data = {**data, **{key: ctx.injected.get(key) for key in tool.injected}}
        shown = _redact(data, tool)
        args = _validated(tool, data, shown, counted)
        if isinstance(args, ToolOutcome):
            return args
        if spoofed:
            log.info("tool %s: ignored model-supplied injected fields %s", name, spoofed)
        if tool.side_effects and ctx.journal is not None:
            # Already ran in this turn (before the turn was recorded, or in an
            # attempt whose worker died): the stored result, not a second run.
            done = ctx.journal.get(idempotency_key(ctx, tool.name, args.model_dump(mode="json")))
            if done is not None:
                # ToolJournal sits in base.py, below this module, so it cannot name ToolOutcome.
                return cast(ToolOutcome, done)
        if tool.name in ctx.gated or not _shown(ctx, tool, _visible(data, tool)):
            # Nothing runs yet: a person decides on exactly these arguments.
            try:
                # The validated arguments, defaults filled in: what runs is what was shown.
                approved = _visible(args.model_dump(mode="json"), tool)
                approval = ctx.require_host().request_approval(ctx, tool.name, approved)
            except ToolError as exc:
                hint = RetryHint(exc.kind, exc.action, tool=tool.name)
                return _failed(str(exc), hint, shown, counted=counted, causes=exc.causes())
            text = f"waiting for approval {approval}: a person must allow this {tool.name} call"
            return ToolOutcome(text, ok=True, arguments=shown, pending=True, approval_id=approval, counted=counted)
        if ctx.defer and not tool.inline:
            # Checked and allowed: the host runs it as its own task.
            text = f"queued: {tool.name} runs as a task; its result replaces this text"
            return ToolOutcome(text, ok=True, arguments=shown, pending=True, queued=True, counted=counted)
        return self._run(tool, ctx, args, data, shown, counted)

    def _run(
        self, tool: Tool, ctx: ToolContext, args: BaseModel, data: dict[str, Any], shown: dict[str, Any], counted: bool
    ) -> ToolOutcome:
        """Run the checked call; a ToolError or a tool's crash is a failed outcome."""
        try:
            with ctx.isolated(held=tool.held):
                returned = tool.run(ctx, args)
        except ToolError as exc:
            hint = RetryHint(
                exc.kind,
                exc.action,
                fields=exc.fields,
                prior_input=_visible(data, tool),
                question=exc.question,
                tool=tool.name,
            )
            return _failed(str(exc), hint, shown, counted=counted, causes=exc.causes())
        except Exception as exc:  # noqa: BLE001 - a broken tool must not kill the step
            log.exception("tool %s raised", tool.name)
            hint = RetryHint("internal", "replan", prior_input=_visible(data, tool), tool=tool.name)
            return _failed(
                f"{tool.name} failed unexpectedly: {type(exc).__name__}: {str(exc)[:500]}", hint, shown, counted=counted
            )
        return self._success(tool, returned, shown, counted)

    def _success(self, tool: Tool, returned: str | ToolAnswer, shown: dict[str, Any], counted: bool) -> ToolOutcome:
        result = returned if isinstance(returned, ToolAnswer) else ToolAnswer(returned)
        if result.pending:
            return ToolOutcome(
                str(result.content),
                ok=True,
                arguments=shown,
                pending=True,
                child_run_id=result.child_run_id,
                approval_id=result.approval_id,
                counted=counted,
            )
        # Goa-AI's contract: a bounded tool's success carries bounds; others never do.
        problem = None
        if tool.bounded and result.bounds is None:
            problem = f"{tool.name} is bounded but returned no bounds"
        elif not tool.bounded and result.bounds is not None:
            problem = f"{tool.name} is not bounded but returned bounds"
        elif tool.result_model is not None:
            problem = _off_model(tool, result)
        artifacts: list[Artifact] = []
        for artifact in result.artifacts:
            try:
                artifacts.append(Artifact(**{**artifact.__dict__, "source_tool": tool.id}).checked())
            except (ValueError, ValidationError) as exc:
                problem = f"{tool.name} returned a malformed {artifact.kind} artifact: {exc}"
        if problem:
            log.error("tool contract broken: %s", problem)
            return _failed(problem, RetryHint("malformed_result", "replan", tool=tool.name), shown, counted=counted)
        text, omitted = result.model_text(self.max_result_chars)
        return ToolOutcome(
            text, ok=True, arguments=shown, bounds=result.bounds, artifacts=artifacts, omitted=omitted, counted=counted
        )


def _off_model(tool: Tool, result: ToolAnswer) -> str | None:
    """Why ``result`` is not what ``tool``'s result model says the model gets, or None."""
    assert tool.result_model is not None
    payload: dict[str, Any] = {"result": result.content}
    if result.bounds is not None:
        payload["bounds"] = result.bounds.as_data()
    try:
        tool.result_model.model_validate(payload)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _dotted(error["loc"])
        return f"{tool.name} answered outside its result model {tool.result_model.__name__}: {where}: {error['msg']}"
    return None


def has_effects(tool: Tool) -> bool:
    """Whether a call of ``tool`` is destructive work in a destructive
    workflow: it changes files, runs commands or calls an MCP server (tagged
    ``execution`` or ``destructive-capable``)."""
    return tool.side_effects or "destructive-capable" in tool.tags


def call_key(name: str, arguments: dict[str, Any]) -> str:
    """What binds an approval to one call: the tool and its exact arguments
    as the caller wrote them (injected fields left out)."""
    text = json.dumps({"tool": name, "arguments": arguments}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _shown(ctx: ToolContext, tool: Tool, arguments: dict[str, Any]) -> bool:
    """False for a call with effects, in a destructive workflow's run, that
    its approver was not shown: a command a model composed, one a message
    asked for. Such a call needs its own approval."""
    return ctx.bound is None or not has_effects(tool) or call_key(tool.name, arguments) in ctx.bound


def idempotency_key(ctx: ToolContext, name: str, arguments: dict[str, Any]) -> str:
    """Same session, same turn, same tool, same arguments, same occurrence:
    the same call. The model's tool_call_id is not used: a real model asked
    again after a crash names its calls anew. ``ctx.occurrence`` tells apart
    identical calls within one turn."""
    text = json.dumps(
        [ctx.meta.session_id, ctx.meta.turn_id, name, arguments, ctx.occurrence], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _failed(
    message: str,
    hint: RetryHint,
    arguments: dict[str, Any] | None = None,
    *,
    counted: bool = True,
    causes: list[str] | None = None,
) -> ToolOutcome:
    text = failure_text(message, hint, causes)
    return ToolOutcome(text, ok=False, arguments=arguments, error_kind=hint.kind, counted=counted)


def _redact(data: dict[str, Any], tool: Tool) -> dict[str, Any]:
    return {key: (INJECTED if key in tool.injected else value) for key, value in data.items()}


def _visible(data: dict[str, Any], tool: Tool) -> dict[str, Any]:
    """The arguments as the model wrote them: injected fields left out."""
    return {key: value for key, value in data.items() if key not in tool.injected}


def _example(tool: Tool) -> dict[str, Any]:
    return {key: value for key, value in example_input(tool.args_model).items() if key not in tool.injected}


def _parsed(tool: Tool, raw_arguments: str, counted: bool) -> dict[str, Any] | ToolOutcome:
    """The model's arguments read as a JSON object, or the failed outcome saying why not."""
    name = tool.name
    try:
        data = bounded_json.loads(raw_arguments or "{}", what=f"arguments for {name}")
    except json.JSONDecodeError as exc:
        hint = RetryHint(
            "invalid_call", "correct_call", prior_input=raw_arguments, example_input=_example(tool), tool=name
        )
        return _failed(f"arguments for {name} are not valid JSON: {exc}", hint, counted=counted)
    except ValueError as exc:  # too long or too deep to read: not echoed back
        hint = RetryHint("invalid_call", "correct_call", example_input=_example(tool), tool=name)
        return _failed(str(exc), hint, counted=counted)
    if not isinstance(data, dict):
        hint = RetryHint("invalid_call", "correct_call", prior_input=data, example_input=_example(tool), tool=name)
        kind = type(data).__name__
        return _failed(
            f"invalid arguments for {name}: (root): Input should be an object, not {kind}", hint, counted=counted
        )
    return data


def _validated(tool: Tool, data: dict[str, Any], shown: dict[str, Any], counted: bool) -> BaseModel | ToolOutcome:
    """``data`` (injected fields filled in) as the tool's argument model, or
    the failed outcome naming the fields at fault."""
    name = tool.name
    try:
        return tool.args_model.model_validate(data)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if not (e["loc"] and e["loc"][0] in tool.injected)]
        if not errors:
            # Only injected fields failed: the host did not supply them; not the model's fault.
            missing = ", ".join(tool.injected)
            hint = RetryHint("unavailable", "finish", tool=name)
            return _failed(f"{name} cannot run here: {missing} not available", hint, shown, counted=counted)
        problems = "; ".join(f"{_dotted(err['loc'])}: {err['msg']}" for err in errors)
        hint = RetryHint(
            "invalid_call",
            "correct_call",
            fields=sorted({_dotted(err["loc"]) for err in errors if err["loc"]}),
            prior_input=_visible(data, tool),
            example_input=_example(tool),
            tool=name,
            why="missing_fields" if all(err["type"] == "missing" for err in errors) else None,
        )
        return _failed(f"invalid arguments for {name}: {problems}", hint, shown, counted=counted)


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


# Tools every agent of a role gets without asking for them.
DEFAULTS: dict[Role, frozenset[str]] = {
    "coordinator": frozenset({"forward_to_agent", "narrate", "finalize"}),
    "step": frozenset({"send_message"}),
}
