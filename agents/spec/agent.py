"""An agent of a workflow, and the script the scripted provider plays for it."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

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

    @model_validator(mode="after")
    def _exactly_one_action(self) -> ScriptTurn:
        given = [n for n in ("say", "calls", "fail") if getattr(self, n) is not None]
        if len(given) != 1:
            found = f" (found {' and '.join(given)})" if given else ""
            raise ValueError(f"a script turn needs exactly one of say, calls, fail{found}")
        return self


class AgentSpec(SpecModel):
    """An agent: what it is for, which model it runs on, what it is told and
    which tools it has."""

    # What the agent is for (zenflow's agent description).
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    provider: Provider | None = None
    model: str | None = None
    system: str = ""
    temperature: float | None = Field(default=None, ge=0, le=2)
    tools: list[str] = Field(default_factory=list)
    script: list[ScriptTurn] = Field(default_factory=list)
