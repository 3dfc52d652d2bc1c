"""Running a turn's tool calls: each call's context, and the calls with
effects run (and journaled) before the turn is recorded."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from agents import bounded_json
from agents.events import EventSink
from agents.llm.base import Completion, ToolCallRequest
from agents.router import MessageRouter
from agents.runner.answer_checks import over_call_cap
from agents.runner.turn import AgentSession, JournalWriter, ToolEnv
from agents.tools.base import INJECTED, Tool, ToolCallMeta, ToolContext
from agents.tools.registry import ToolRegistry, idempotency_key


def run_side_effects(
    turn: AgentSession,
    completion: Completion,
    *,
    registry: ToolRegistry,
    tools: list[Tool],
    journal: JournalWriter,
) -> int:
    """Run the side-effecting calls of a completion before its turn is
    recorded, keeping each result in ``journal`` as soon as it exists. The
    turn's transaction then finds them there (apply_completion with
    ``env.journal``) and a retry of a turn whose worker died does not run a
    finished call again. Returns how many calls ran."""
    env = turn.env or ToolEnv()
    ran = 0
    if env.defer:
        return ran  # they run as tasks, each journaled there
    if over_call_cap(completion.tool_calls, registry, env) is not None:
        return ran  # the turn asks for more calls than the step has left: none runs
    for call, occurrence in with_occurrence(completion.tool_calls):
        tool = registry.get(call.name)
        if tool is None or not tool.side_effects or tool.name in env.gated or tool not in tools:
            continue
        # Messages and events belong to the turn's transaction: these tools use neither.
        ctx = tool_context(turn, env, call.id, None, None, occurrence)  # type: ignore[arg-type]
        try:
            key = idempotency_key(ctx, tool.name, _validated(tool, ctx, call.arguments))
        except ValueError:
            continue  # invalid arguments: the turn reports them, nothing runs
        if journal.get(key) is not None:
            continue
        journal.begin(key, tool.name)
        ctx.journal = None
        outcome = registry.call(ctx, call.name, call.arguments, tools)
        journal.finish(key, outcome)
        ran += 1
    return ran


def with_occurrence(calls: list[ToolCallRequest]) -> list[tuple[ToolCallRequest, int]]:
    seen: dict[tuple[str, str], int] = {}
    numbered = []
    for call in calls:
        key = (call.name, call.arguments)
        numbered.append((call, seen.get(key, 0)))
        seen[key] = seen.get(key, 0) + 1
    return numbered


def tool_context(
    turn: AgentSession, env: ToolEnv, call_id: str, router: MessageRouter, sink: EventSink, occurrence: int
) -> ToolContext:
    return ToolContext(
        meta=ToolCallMeta(
            run_id=turn.run_id,
            session_id=f"{turn.run_id}/{turn.step_id}" + (f"/attempt-{turn.attempt}" if turn.attempt else ""),
            turn_id=f"{turn.step_id}/{turn.turn}" + (f"/attempt-{turn.attempt}" if turn.attempt else ""),
            tool_call_id=call_id,
            parent_tool_call_id=env.parent_tool_call_id,
        ),
        step_id=turn.step_id,
        role=turn.role,
        router=router,
        sink=sink,
        host=env.host,
        workspace=env.workspace,
        injected={
            **env.injected,
            "run_id": turn.run_id,
            **({"workspace": str(env.workspace)} if env.workspace else {}),
        },
        destructive_approved=env.destructive_approved,
        gated=env.gated,
        bound=env.bound,
        journal=env.journal,
        occurrence=occurrence,
        defer=env.defer,
        sandbox=env.sandbox,
    )


def _validated(tool: Tool, ctx: ToolContext, raw: str) -> dict[str, Any]:
    """The call's arguments as the registry will validate them; ValueError if they do not."""
    try:
        data = bounded_json.loads(raw or "{}", what="arguments")
        if not isinstance(data, dict):
            raise ValueError("not an object")
        data = {**data, **{key: ctx.injected.get(key) for key in tool.injected}}
        return tool.args_model.model_validate(data).model_dump(mode="json")
    except (ValueError, ValidationError) as exc:
        raise ValueError(str(exc)) from None


def redacted_raw(arguments: str, tool: Tool | None) -> str:
    """The raw arguments for an event, with any injected field masked."""
    if tool is None or not tool.injected:
        return arguments
    try:
        data = bounded_json.loads(arguments or "{}")
    except ValueError:
        return arguments
    if isinstance(data, dict):
        data = {key: (INJECTED if key in tool.injected else value) for key, value in data.items()}
    return json.dumps(data)
