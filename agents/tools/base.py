"""Tools: declared once with a pydantic argument model, gated by role.

From one ``Tool`` declaration come the JSON schema the model sees, argument
validation, and the catalog entry (``tool_schemas.json``). The registry
(``agents.tools.registry``), not the prompt, decides who may call what.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from agents.events import EventSink
from agents.router import MessageRouter
from agents.sandbox import Sandbox
from agents.tools.errors import FailureKind, RecoveryAction
from agents.tools.results import ARTIFACT_SCHEMAS, Audience, ToolAnswer
from agents.tools.worker_request import WorkerRequest

Role = Literal["coordinator", "step"]

# What a redacted injected value looks like in stored arguments, events and the UI.
INJECTED = "[injected]"


class ToolError(Exception):
    """A tool refused the call; the message goes back to the model with a
    retry hint of ``kind`` and ``action``. ``cause`` is the error beneath it
    (another ToolError, say a child run's across an agent-as-tool hop, or
    any exception); ``raise ToolError(...) from exc`` sets it too."""

    def __init__(
        self,
        message: str,
        *,
        kind: FailureKind = "domain_rejection",
        action: RecoveryAction = "replan",
        fields: list[str] | None = None,
        question: str = "",
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.action = action
        self.fields = fields or []
        self.question = question
        self.cause = cause

    @classmethod
    def from_error(cls, error: BaseException, **hint: Any) -> ToolError:
        """``error`` as a ToolError (itself, if it is one), keeping it as the cause."""
        if isinstance(error, ToolError):
            return error
        return cls(str(error) or type(error).__name__, cause=error, **hint)

    def causes(self) -> list[str]:
        """The messages of the errors beneath this one, outermost first."""
        found: list[str] = []
        seen = {id(self)}
        below = self.cause or self.__cause__
        while below is not None and id(below) not in seen:
            seen.add(id(below))
            found.append(str(below) if isinstance(below, ToolError) else f"{type(below).__name__}: {below}")
            below = getattr(below, "cause", None) or below.__cause__
        return found


@dataclass(frozen=True)
class ToolCallMeta:
    """Who is calling, passed explicitly to every executor (Goa-AI's names).

    ``session_id`` is the agent's conversation (``<run>/<step>``), ``turn_id``
    one model turn of it, ``parent_tool_call_id`` the call this agent works
    for: the spawn_worker call of a spawned worker, or the tool call that
    started a child run."""

    run_id: str
    session_id: str
    turn_id: str
    tool_call_id: str
    parent_tool_call_id: str = ""

    def as_data(self) -> dict[str, str]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "tool_call_id": self.tool_call_id,
            "parent_tool_call_id": self.parent_tool_call_id,
        }


class ToolHost(Protocol):
    """What the runtime asks of whoever stores runs (zenweb's ``runs`` app):
    tools that change the shape of a run go through it."""

    def spawn_worker(self, ctx: ToolContext, request: WorkerRequest) -> str:
        """Add a worker step to the run; return its step id or raise ToolError."""
        ...

    def start_child_run(self, ctx: ToolContext, workflow: str, inputs: dict[str, Any]) -> str:
        """Start a run of ``workflow`` for this call; return its id or raise ToolError."""
        ...

    def isolated(self, *, held: bool = False) -> AbstractContextManager[Any]:
        """A scope whose writes are undone if the tool raises (a savepoint).
        ``held``: the tool writes only through the turn's held writes (see
        Tool), which a host may undo without a savepoint."""
        ...

    def record_claim(self, ctx: ToolContext, claim: dict[str, Any]) -> str:
        """Store a claim the agent makes with its source; return its id."""
        ...

    def request_approval(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> str:
        """Ask a person to allow this call; return the approval id."""
        ...

    def ask_person(self, ctx: ToolContext, question: str, options: list[str]) -> str:
        """Ask a person ``question`` (one of ``options``, if any) for this
        call, whose result is their answer; return the question's id."""
        ...


class ToolJournal(Protocol):
    """Where the results of side-effecting calls are kept, keyed by an
    idempotency key, so a retried turn gets them instead of running again."""

    def get(self, key: str) -> Any | None:
        """The stored ToolOutcome of a finished call, or None."""
        ...


@dataclass
class ToolContext:
    """What an executing tool may touch. ``finalized`` collects finalize();
    ``injected`` holds the values of injected argument fields (run_id, user,
    workspace, ...), filled in before validation and never shown to the model."""

    meta: ToolCallMeta
    step_id: str
    role: Role
    router: MessageRouter
    sink: EventSink
    host: ToolHost | None = None
    workspace: Path | None = None
    injected: dict[str, Any] = field(default_factory=dict)
    # The run was approved for destructive work (shell commands that delete, force-push, ...).
    destructive_approved: bool = False
    # Tools whose every call waits for a person's approval (the workflow's approval list).
    gated: frozenset[str] = frozenset()
    # A run of a destructive workflow: the keys (registry.call_key) of the
    # calls its approver was shown. Any other call of a tool with effects
    # waits for its own approval, whatever message asked for it. None: the
    # workflow is not marked destructive.
    bound: frozenset[str] | None = None
    # Results of side-effecting calls already run for this turn (see ToolJournal).
    journal: ToolJournal | None = None
    # Which identical call of this turn this is (0 for the first).
    occurrence: int = 0
    # Service-backed (not inline) calls are not run now: they come back
    # pending and ``queued``, and the host runs each as its own task.
    defer: bool = False
    finalized: list[str] = field(default_factory=list)
    # Set by the host when the call's step or run stops while the call runs
    # (a cancel, a failure elsewhere): a tool that takes long stops what it
    # started and returns (run_shell kills its command), as a Temporal
    # activity does when its heartbeat hears of a cancel.
    cancelled: threading.Event = field(default_factory=threading.Event)
    # How tool processes start (run_shell): None is the default sandbox, on.
    sandbox: Sandbox | None = None

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    def isolated(self, *, held: bool = False) -> AbstractContextManager[Any]:
        return self.host.isolated(held=held) if self.host else nullcontext()

    def require_host(self) -> ToolHost:
        if self.host is None:
            raise ToolError("this tool needs a run store and none is attached", kind="unavailable", action="finish")
        return self.host


@dataclass(frozen=True)
class Tool:
    """One tool. ``run`` gets the context and the validated arguments and
    returns text or a ToolAnswer; it raises ToolError to refuse.

    ``injected`` names argument fields the model never sees: they are removed
    from the schema and filled from ``ToolContext.injected``. ``bounded`` tools
    return lists and must give Bounds. Tools tagged ``bookkeeping`` (messaging)
    do not count against the run policy's tool-call caps.

    ``inline`` tools change the run itself (messages, claims, workers, child
    runs) and run inside the turn that called them. Every other tool is
    service-backed: where the host defers them (``ToolContext.defer``) each
    call runs later as its own durable task, like a Temporal activity.
    ``timeout`` is the longest one call may take, in seconds. ``held``
    tools (messaging) write only through the turn's event sink and router,
    which hold what they write until the turn is recorded: a call that
    raises is undone by forgetting it, with a savepoint only if the call
    reached the database (ToolHost.isolated)."""

    name: str
    description: str
    args_model: type[BaseModel]
    roles: frozenset[Role]
    run: Callable[[ToolContext, Any], str | ToolAnswer]
    toolset: str = "builtin"
    service: str = "zenweb"
    tags: tuple[str, ...] = ()
    result_model: type[BaseModel] | None = None
    injected: tuple[str, ...] = ()
    bounded: bool = False
    # Artifacts this tool may attach: (kind, audience) pairs, for the catalog.
    server_data: tuple[tuple[str, Audience], ...] = ()
    inline: bool = False
    timeout: float | None = None
    held: bool = False

    @cached_property
    def id(self) -> str:
        """``<service>.<toolset>.<tool>``, as in Goa-AI's tool catalogs:
        made once per tool (a registry sorts by it every turn)."""
        return f"{self.service}.{self.toolset}.{self.name}"

    @property
    def bookkeeping(self) -> bool:
        return "bookkeeping" in self.tags

    @property
    def side_effects(self) -> bool:
        """Tagged ``execution``: it changes the world outside the database
        (files, commands), so a retried turn must not run it twice."""
        return "execution" in self.tags

    def parameters(self) -> dict[str, Any]:
        """The argument JSON schema the model sees: injected fields removed."""
        schema = _json_schema(self.args_model)
        schema.pop("title", None)
        if self.injected:
            properties = schema.get("properties", {})
            for name in self.injected:
                properties.pop(name, None)
            required = [name for name in schema.get("required", []) if name not in self.injected]
            if required:
                schema["required"] = required
            else:
                schema.pop("required", None)
        return schema

    def schema(self) -> dict[str, Any]:
        """The function-tool schema sent to the model: a field's title that
        only repeats its name ("Target Step Id") is left out (tokens on every
        request that carries the tool; tool_schemas.json keeps it)."""
        parameters = self.parameters()
        for name, prop in parameters.get("properties", {}).items():
            if isinstance(prop, dict) and prop.get("title") == name.replace("_", " ").title():
                prop.pop("title")
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }

    def catalog_entry(self) -> dict[str, Any]:
        """This tool in tool_schemas.json's shape (Goa-AI's)."""
        if self.result_model is not None:
            result = {"name": self.result_model.__name__, "schema": self.result_model.model_json_schema()}
        else:
            result = {"name": "Text", "schema": {"type": "string", "description": "Plain text, read as it is."}}
        server_data = []
        for kind, audience in self.server_data:
            model = ARTIFACT_SCHEMAS.get(kind)
            server_data.append(
                {"kind": kind, "audience": audience, "schema": model.model_json_schema() if model else {}}
            )
        return {
            "id": self.id,
            "service": self.service,
            "toolset": self.toolset,
            "title": self.name.replace("_", " ").capitalize(),
            "description": self.description,
            "tags": list(self.tags),
            "payload": {"name": self.args_model.__name__, "schema": self.parameters()},
            "result": result,
            "server_data": server_data,
        }


# Every turn sends its tools' schemas, and pydantic builds one in about a
# millisecond: keep each model's, for as long as the model exists (MCP
# tools' models come and go with their servers).
_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = weakref.WeakKeyDictionary()


def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A fresh copy of ``model``'s JSON schema: callers may change it."""
    schema = _SCHEMAS.get(model)
    if schema is None:
        schema = _SCHEMAS[model] = model.model_json_schema()
    return copy.deepcopy(schema)
