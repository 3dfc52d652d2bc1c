"""What a step's model is asked: its system prompt, its first message (the
instructions and its dependencies' outputs, capped), and each request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.llm.base import CompletionRequest
from agents.router import RouterMessage
from agents.runner.turn import AgentSession
from agents.spec import AgentSpec
from agents.tools.base import Tool

TRUNCATION_MARKER = "...[truncated for context limit]"
MAX_DEPENDENCY_CHARS = 8 * 1024
MAX_PROMPT_CHARS = 120 * 1024
PREVIEW_CHARS = 2000


def step_prompt(instructions: str, dependency_outputs: dict[str, str], criteria: Sequence[str] = ()) -> str:
    """The first user message of a step: its instructions, the workflow's
    success criteria (checked against the run's claims when it ends), then
    what its dependencies produced, each capped so one chatty step cannot
    crowd out the rest."""
    parts = [instructions.strip() or "Do your part of the workflow."]
    if criteria:
        listed = "\n".join(f"- {criterion}" for criterion in criteria)
        parts.append(f"## Success criteria\nThe run's claims are checked against these when it ends:\n{listed}")
    for step_id, output in dependency_outputs.items():
        parts.append(f"## Output of step {step_id}\n{capped(output, MAX_DEPENDENCY_CHARS)}")
    return capped("\n\n".join(parts), MAX_PROMPT_CHARS)


def step_system_prompt(step_id: str, agent: AgentSpec) -> str:
    rules = (
        f"You are the agent of step '{step_id}' in a zenweb workflow. You cannot talk to other "
        "steps directly: call send_message to tell the coordinator something, and it decides "
        "whether to forward it. Messages forwarded to you appear as user messages. When your "
        "part is done, answer with your result and no tool call."
    )
    return f"{agent.system.strip()}\n\n{rules}" if agent.system.strip() else rules


def inbox_text(messages: list[RouterMessage]) -> str:
    return "\n\n".join(f"[message {m.message_id} from {m.sender} ({m.type})]\n{m.content}" for m in messages)


def build_request(
    turn: AgentSession,
    tools: list[Tool],
    inbox: list[RouterMessage],
    extra_user: str = "",
    *,
    deadline: float | None = None,
) -> CompletionRequest:
    """The conversation so far plus what arrived since: drained messages become
    one user message with a header naming each sender. ``deadline``: see
    CompletionRequest."""
    messages = list(turn.transcript)
    added = "\n\n".join(part for part in (inbox_text(inbox), extra_user) if part)
    if added:
        messages.append({"role": "user", "content": added})
    return CompletionRequest(
        agent=turn.agent_name,
        messages=messages,
        tools=[tool.schema() for tool in tools],
        model=turn.agent.model,
        temperature=turn.agent.temperature,
        top_p=turn.agent.top_p,
        variables=turn.variables,
        deadline=deadline,
    )


def new_step_transcript(step_id: str, agent: AgentSpec, prompt: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": step_system_prompt(step_id, agent)},
        {"role": "user", "content": prompt},
    ]


def capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER
