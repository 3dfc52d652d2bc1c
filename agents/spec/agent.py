"""An agent of a workflow, and the script the scripted provider plays for it."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from agents.spec.fields import MAX_DESCRIPTION, Provider, SpecModel


class ScriptCall(SpecModel):
    """A tool call the scripted provider makes."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptTurn(SpecModel):
    """One model turn of the scripted provider: exactly one of say, calls, fail."""

    say: str | None = None
    calls: list[ScriptCall] | None = Field(default=None, min_length=1)
    fail: str | None = None
    delay: float = Field(default=0, ge=0, le=60)
    # Played only in this attempt of its step (1 the first; a step's retries
    # run it again); the script's other attempts skip it.
    attempt: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _exactly_one_action(self) -> ScriptTurn:
        given = [n for n in ("say", "calls", "fail") if getattr(self, n) is not None]
        if len(given) != 1:
            found = f" (found {' and '.join(given)})" if given else ""
            raise ValueError(f"a script turn needs exactly one of say, calls, fail{found}")
        return self


# zenflow's builtin tools by the name of the zenweb tool that does their work.
ZENFLOW_TOOLS = {"bash": "run_shell", "read": "read_file", "write": "write_file", "edit": "edit_file"}


class AgentSpec(SpecModel):
    """An agent: what it is for, which model it runs on, what it is told and
    which tools it has."""

    # What the agent is for (zenflow's agent description): required when a
    # workflow is parsed (agents.spec.checks), not of a stored version.
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    provider: Provider | None = None
    model: str | None = None
    # The system prompt; zenflow writes it as ``prompt`` (parse_workflow
    # reads that into ``system``; "@file" is read from the workflow's folder).
    system: str = ""
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    # Turns a step of this agent may take; 0 or none: options.maxTurns.
    max_turns: int | None = Field(default=None, ge=0, le=500)
    tools: list[str] = Field(default_factory=list)
    disallowed_tools: list[str] = Field(default_factory=list)
    # zenflow's structured result (a submit_result tool); an untilAgent
    # judge's schema has a required boolean ``done``.
    result_schema: dict[str, Any] | None = None
    script: list[ScriptTurn] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _prompt_is_the_system_prompt(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prompt" in data:
            data = dict(data)
            prompt = data.pop("prompt")
            if "system" in data:
                raise ValueError("give prompt or system (the same system prompt), not both")
            data["system"] = prompt
        return data

    @field_validator("tools", "disallowed_tools", mode="before")
    @classmethod
    def _zenflow_tool_names(cls, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [ZENFLOW_TOOLS.get(name, name) if isinstance(name, str) else name for name in value]

    @property
    def tool_names(self) -> list[str]:
        """The tools this agent may call: ``tools`` less ``disallowedTools``."""
        return [tool for tool in self.tools if tool not in self.disallowed_tools]
