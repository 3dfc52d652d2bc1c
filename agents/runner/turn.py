"""What a turn is given (who takes it, its transcript, its tools'
environment) and what it gives back (the result, each tool call's record)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agents.sandbox import Sandbox
from agents.spec import DEFAULT_EMPTY_ANSWER_RETRIES, AgentSpec
from agents.tools.base import Role, ToolCallMeta, ToolHost, ToolJournal
from agents.tools.registry import ToolOutcome


@dataclass
class AgentSession:
    """Who is taking a turn, and everything said so far."""

    run_id: str
    step_id: str
    agent_name: str
    agent: AgentSpec
    role: Role
    transcript: list[dict[str, Any]]
    variables: dict[str, str] = field(default_factory=dict)
    env: ToolEnv | None = None
    # Empty answers in a row answered with a hint before the turn fails
    # (options.maxEmptyAnswerRetries); None: an empty answer is a plain
    # answer (a coordinator with nothing to route).
    empty_answer_retries: int | None = DEFAULT_EMPTY_ANSWER_RETRIES
    # The step's attempt (0 the first; retries run it again): its tool calls
    # are journaled apart from an earlier attempt's.
    attempt: int = 0

    @property
    def turn(self) -> int:
        """1-based number of the turn about to be taken."""
        return sum(1 for m in self.transcript if m.get("role") == "assistant") + 1


@dataclass
class ToolEnv:
    """What a turn's tools get besides the router: the run store (for
    spawn_worker and child runs), the run's workspace, the values of injected
    argument fields, and whether destructive work was approved."""

    host: ToolHost | None = None
    workspace: Path | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    destructive_approved: bool = False
    parent_tool_call_id: str = ""
    gated: frozenset[str] = frozenset()
    # The calls shown when a destructive workflow was approved (ToolContext.bound).
    bound: frozenset[str] | None = None
    journal: ToolJournal | None = None
    # Service-backed calls come back queued; the host runs each as a task.
    defer: bool = False
    # options.maxToolCalls and the counted calls the step made before this
    # turn: a turn asking for more than is left runs none of its calls.
    tool_call_cap: int | None = None
    tool_calls_made: int = 0
    # coordinator.requireWorkers, and the workers the run had before this turn.
    require_workers: bool = False
    workers: int = 0
    # Workers the coordinator spawned in this wake, which have yet to run:
    # a finalize waits for their results (the coordinator is woken with them).
    awaited_workers: int = 0
    # How tool processes start (None: the default sandbox).
    sandbox: Sandbox | None = None


@dataclass(frozen=True)
class ToolCallRecord:
    meta: ToolCallMeta
    name: str
    # The model's raw argument text, injected fields masked.
    arguments: str
    outcome: ToolOutcome
    duration_ms: int

    @property
    def tool_call_id(self) -> str:
        return self.meta.tool_call_id

    @property
    def result(self) -> str:
        return self.outcome.text

    @property
    def ok(self) -> bool:
        return self.outcome.ok


@dataclass
class TurnResult:
    """``waiting`` means a tool call's result comes later (a child run);
    ``failed``, that the turn ends its step (or, the coordinator's, its run)
    for ``error``. ``over_call_cap``: the turn asked for more tool calls than
    the step had left or a turn may make, and none ran; ``call_cap_exhausted``: it had none left."""

    status: Literal["continue", "completed", "waiting", "failed"]
    transcript: list[dict[str, Any]]
    output: str = ""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    finalized: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    over_call_cap: bool = False
    call_cap_exhausted: bool = False


class JournalWriter(ToolJournal, Protocol):
    def begin(self, key: str, name: str) -> None:
        """Record (durably, at once) that a call is about to run."""
        ...

    def finish(self, key: str, outcome: ToolOutcome) -> None:
        """Record (durably, at once) what the call returned."""
        ...


# runs/actions/coordinator.py and model_calls.py import AgentSession as AgentTurn:
# this alias goes when they import it by its name.
AgentTurn = AgentSession
