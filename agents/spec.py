"""The workflow file: its schema, and a loader that says what is wrong and where.

A workflow is a YAML document naming agents and the steps that run them. YAML keys
are camelCase (``dependsOn``), Python attributes snake_case (``depends_on``).
``parse_workflow`` and ``load_workflow`` report every problem they find at once,
each with a line number and the YAML path of the field.

A step is a plain step (an ``agent`` and its ``instructions``) or a container:
a ``loop`` (repeat-until, or forEach over a list input) or an ``include`` of a
sub-workflow file. Inner step ids are local to their container; at run time
they are namespaced (``agents.ids``) and ``agents.scheduler`` expands them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from types import NoneType, SimpleNamespace, UnionType
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from agents.inputs import workspace_path
from agents.spec_usage import (
    STEP_VARIABLES,
    KnownTools,
    coordinator_prompt_problems,
    did_you_mean,
    mcp_tool_known,
    placeholder_problems,
    tool_use_problems,
)
from agents.tools.mcp.config import ServerName, server_of
from agents.yaml_locations import Location, line_for, parse_with_locations

STEP_ID_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
INPUT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
MAX_STEPS = 100
MAX_DESCRIPTION = 2000
MAX_ITERATIONS = 100
# Containers inside containers (loops in loops), and include files including others.
MAX_NESTING = 5
MAX_INCLUDE_DEPTH = 5
# Tool calls: the default and the longest per-call timeout (seconds).
DEFAULT_TOOL_TIMEOUT = 300.0
MAX_TOOL_TIMEOUT = 3600.0
DEFAULT_FOR_EACH_CONCURRENCY = 5
# Hints for empty answers before the step fails (options.maxEmptyAnswerRetries).
DEFAULT_EMPTY_ANSWER_RETRIES = 2
_PATTERN_HINTS = {
    STEP_ID_PATTERN: "use lowercase letters, digits, '_' and '-', starting with a letter, at most 64 characters",
    INPUT_NAME_PATTERN: "use lowercase letters, digits and '_', starting with a letter, at most 64 characters",
}

Name = Annotated[str, StringConstraints(pattern=STEP_ID_PATTERN)]
InputName = Annotated[str, StringConstraints(pattern=INPUT_NAME_PATTERN)]
# ``path``: a place inside the run's workspace (agents.inputs.workspace_path).
InputType = Literal["string", "integer", "number", "boolean", "path"]
Provider = Literal["scripted", "openai"]
OnStepFailure = Literal["cascade", "skip-dependents", "abort"]
Mode = Literal["chat", "code"]

_INPUT_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "path": str,
}

# Set by parse_workflow, which runs the cross-field checks itself so that each
# problem gets its own line; other callers of model_validate get them as one error.
_DEFER_CHECKS = "zenweb.spec.defer_checks"


class _Spec(BaseModel):
    # Infinity is no timeout, budget or count a run can keep (nor JSON can store).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel, allow_inf_nan=False)


class InputSpec(_Spec):
    """A value the person starting a run provides, substituted as ``$name``."""

    type: InputType = "string"
    required: bool = False
    description: str = ""
    default: Any = None

    @model_validator(mode="after")
    def _default_matches_type(self) -> InputSpec:
        default = self.default
        # bool is an int in Python, but not an integer or a number in a form.
        wrong_bool = isinstance(default, bool) != (self.type == "boolean")
        if default is not None and (wrong_bool or not isinstance(default, _INPUT_TYPES[self.type])):
            raise ValueError(f"default {default!r} is not of type {self.type}")
        if default is not None and self.type == "path":
            try:
                workspace_path(default)
            except ValueError as exc:
                raise ValueError(f"default {default!r}: {exc}") from None
        return self


class ScriptCall(_Spec):
    """A tool call the scripted provider makes."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptTurn(_Spec):
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


class AgentSpec(_Spec):
    """An agent: which model it runs on, what it is told and which tools it has."""

    provider: Provider | None = None
    model: str | None = None
    system: str = ""
    temperature: float | None = Field(default=None, ge=0, le=2)
    tools: list[str] = Field(default_factory=list)
    script: list[ScriptTurn] = Field(default_factory=list)


class LoopSpec(_Spec):
    """A container that runs its inner ``steps`` once per iteration.

    Repeat-until (no ``forEach``): iteration N runs as ``<id>.N.<inner>``, one
    iteration after another. ``maxIterations`` (1 to 100) is required. The loop
    is done after an iteration when the output of its last listed inner step
    contains the ``until`` text (a case-sensitive substring), or when the
    ``untilAgent`` judge answers yes, or after ``maxIterations`` iterations.

    forEach: one iteration per item of the string input ``forEach`` names (a
    JSON list or comma-separated values), as ``<id>[N].<inner>``, at most
    ``maxConcurrency`` (default 5) running at once. Instructions see ``$item``
    and ``$index``.
    """

    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_STEPS)
    max_iterations: int | None = Field(default=None, ge=1, le=MAX_ITERATIONS)
    until: str | None = Field(default=None, min_length=1)
    until_agent: str | None = None
    for_each: str | None = None
    max_concurrency: int | None = Field(default=None, ge=1)

    @property
    def kind(self) -> Literal["repeat", "forEach"]:
        return "repeat" if self.for_each is None else "forEach"


class StepSpec(_Spec):
    """A plain step runs one agent once its dependencies have finished.

    A container step has exactly one of ``loop`` and ``include`` instead of an
    agent; steps that depend on it wait for the whole container. ``include``
    names a workflow file relative to this file's folder; ``with`` gives the
    included workflow's inputs (``$name`` of this workflow's inputs is
    substituted). The loader puts the parsed file in ``included``.
    """

    id: Name
    agent: str | None = None
    instructions: str = ""
    depends_on: list[str] = Field(default_factory=list)
    loop: LoopSpec | None = None
    include: str | None = None
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    included: WorkflowSpec | None = None

    @field_validator("included", mode="before")
    @classmethod
    def _included_comes_from_the_loader(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and (info.context or {}).get(_DEFER_CHECKS):
            raise ValueError("unknown field 'included': the loader fills it in from include")
        return value

    @property
    def kind(self) -> Literal["step", "loop", "include"]:
        """``step`` for a plain step, else the kind of container."""
        if self.loop is not None:
            return "loop"
        if self.include is not None:
            return "include"
        return "step"

    @property
    def is_container(self) -> bool:
        return self.kind != "step"


class Budget(_Spec):
    """What a whole run may spend; past any of these it ends failed, naming
    the budget. Time spent waiting for a person's approval does not count."""

    tokens: int | None = Field(default=None, ge=1, description="prompt + completion tokens, all agents")
    tool_calls: int | None = Field(default=None, ge=1, description="counted tool calls (not bookkeeping)")
    wall_time: float | None = Field(default=None, gt=0, description="seconds from start, less approval waits")
    # Per invocation, not per run: a coordinator wake whose prompt is past this
    # is recorded (coordinator_over_budget), and its "finish" prompt is compacted.
    coordinator_tokens: int | None = Field(
        default=None, ge=1, description="prompt tokens one coordinator invocation may send"
    )


class SandboxOptions(_Spec):
    """Limits of this workflow's tool processes (run_shell), each at most
    the operator's maximum (ZENWEB_SANDBOX_MAX_*): a larger value is lowered
    to it, and an unset one is the maximum. ``network`` is granted only where
    the operator allows it (ZENWEB_SANDBOX_ALLOW_NETWORK)."""

    processes: int | None = Field(default=None, ge=1, description="processes and threads at once")
    cpu_seconds: int | None = Field(default=None, ge=1, description="CPU seconds per call")
    memory_mb: int | None = Field(default=None, ge=16, description="address space per process, MiB")
    file_size_mb: int | None = Field(default=None, ge=1, description="largest file written, MiB")
    disk_mb: int | None = Field(default=None, ge=1, description="the workspace's size, MiB")
    network: bool = False


class WorkflowOptions(_Spec):
    """Run-wide limits. Timeouts are in seconds; None means no limit."""

    max_concurrency: int = Field(default=5, ge=1)
    max_turns: int = Field(default=50, ge=1, le=500)
    on_step_failure: OnStepFailure = "cascade"
    # Deadlines, enforced by runs/ (a turn's checks and the sweeper): past one
    # the run, or the step, fails. Approval waits count, unlike budget.wallTime.
    timeout: float | None = Field(default=None, gt=0, description="seconds from the run's start")
    step_timeout: float | None = Field(default=None, gt=0, description="seconds from each step's start")
    # Messaging caps; None takes zenweb's setting (see README, "Messages and drops").
    max_mailbox_size: int | None = Field(default=None, ge=0)  # 0 = unbounded
    max_wake_cycles: int | None = Field(default=None, ge=1)  # the coordinator's
    step_max_wake_cycles: int | None = Field(default=None, ge=0)
    hold_timeout: float | None = Field(default=None, ge=0)  # 0 = no limit
    # The run policy: tool calls a step may make, in a row that may fail,
    # and tool calls the whole run may make. Past a cap the step fails.
    max_tool_calls: int = Field(default=200, ge=1)
    max_consecutive_tool_failures: int = Field(default=5, ge=1)
    max_run_tool_calls: int = Field(default=2000, ge=1)
    # An answer with no text and no tool call is answered with a hint this
    # many times in a row; the next one fails the step (or, the coordinator's,
    # the run) with "empty answer from the model".
    max_empty_answer_retries: int = Field(default=DEFAULT_EMPTY_ANSWER_RETRIES, ge=0, le=10)
    budget: Budget = Field(default_factory=Budget)
    # Workers the coordinator may add with spawn_worker, and the agent they
    # run as when spawn_worker names none.
    max_workers: int = Field(default=8, ge=0, le=MAX_STEPS)
    worker_agent: str = "worker"
    # How service-backed tool calls run: ``tasks`` (each its own durable
    # Celery task; the step's worker is freed while they run) or ``inline``
    # (in the step's turn, one after another).
    tool_execution: Literal["tasks", "inline"] = "tasks"
    # The longest one tool call may take (seconds), and per-tool overrides.
    tool_timeout: float = Field(default=DEFAULT_TOOL_TIMEOUT, gt=0, le=MAX_TOOL_TIMEOUT)
    tool_timeouts: dict[str, Annotated[float, Field(gt=0, le=MAX_TOOL_TIMEOUT)]] = Field(default_factory=dict)
    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)


class CoordinatorPolicy(_Spec):
    """What the run's coordinator must do. ``requireWorkers``: it plans the
    work with spawn_worker, and a finalize before any worker was spawned is
    refused with a hint (the model gets another turn)."""

    require_workers: bool = False


class ToolExposure(_Spec):
    """Offer this workflow to other workflows' agents as a tool (agent-as-tool):
    calling it starts a child run whose result is the tool's result. The
    tool's arguments are the workflow's inputs."""

    name: Name
    description: str = Field(default="", max_length=MAX_DESCRIPTION)


class ApprovalPolicy(_Spec):
    """Who must approve destructive work, and for how long a request stands.
    With ``approvers: 2`` two different people must approve, and nobody
    approves their own request."""

    approvers: int = Field(default=1, ge=1, le=2)
    expires_after: float | None = Field(default=None, gt=0, description="seconds until a pending request lapses")


class WorkflowSpec(_Spec):
    """A validated workflow. Build one with ``parse_workflow`` or ``load_workflow``.

    ``steps`` may be empty when the coordinator plans the work itself (its
    agent lists spawn_worker)."""

    name: Name
    # Stored in an integer column: PostgreSQL's holds at most 2**31 - 1.
    version: int = Field(default=1, ge=1, le=2**31 - 1)
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    inputs: dict[InputName, InputSpec] = Field(default_factory=dict)
    agents: dict[Name, AgentSpec] = Field(min_length=1)
    steps: list[StepSpec] = Field(default_factory=list, max_length=MAX_STEPS)
    options: WorkflowOptions = Field(default_factory=WorkflowOptions)
    coordinator: CoordinatorPolicy = Field(default_factory=CoordinatorPolicy)
    tool: ToolExposure | None = None
    # The catalog entry (seed 004): what a command must say to select this
    # workflow, what it returns, how to tell it worked, the mode it needs,
    # and which work waits for a person's approval.
    triggers: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    success_criteria: list[str] = Field(default_factory=list)
    mode: Mode = "chat"
    destructive: bool = False
    approvals: list[str] = Field(default_factory=list, description="tools whose every call needs approval")
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    # MCP servers this workflow's agents use, by name: each is one the
    # operator configured (ZENWEB_MCP_SERVERS). A workflow never says how to
    # start or reach one: registering needs staff, but staff is not root,
    # and a server's command runs as the server user.
    mcp: list[ServerName] = Field(default_factory=list)

    @field_validator("mcp", mode="before")
    @classmethod
    def _mcp_names_only(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, dict):
            return value
        if (info.context or {}).get(_DEFER_CHECKS):
            raise ValueError(_mcp_config_refusal(value))
        # A version stored when workflows could configure servers: only the
        # names are kept, so its tools come from the operator's servers.
        return list(value)

    @model_validator(mode="after")
    def _check_references(self, info: ValidationInfo) -> WorkflowSpec:
        if not (info.context or {}).get(_DEFER_CHECKS):
            # Stored versions come back this way: they were checked in full when
            # registered, and a rule added since must not make one unreadable.
            problems = [f"{_dotted(loc)}: {msg}" for loc, msg in _reference_problems(self, None)]
            if problems:
                raise ValueError("; ".join(problems))
        return self

    def step(self, step_id: str) -> StepSpec:
        """The step with this id; raises KeyError if there is none."""
        for step in self.steps:
            if step.id == step_id:
                return step
        raise KeyError(f"no step {step_id!r}")

    def topological_order(self) -> list[str]:
        """Step ids with every step after its dependencies.

        Among the steps that are ready, the one first in the file goes first, so
        a file already in dependency order comes back unchanged.
        """
        order: list[str] = []
        done: set[str] = set()
        remaining = list(self.steps)
        while remaining:
            ready = next((s for s in remaining if all(d in done for d in s.depends_on)), None)
            if ready is None:
                raise ValueError("the steps form a dependency cycle")
            remaining.remove(ready)
            order.append(ready.id)
            done.add(ready.id)
        return order

    def dependents(self, step_id: str, *, transitive: bool = False) -> list[str]:
        """Steps that depend on ``step_id``, in file order.

        With ``transitive=True`` this includes the dependents of dependents: the
        steps a failure of ``step_id`` cascades to.
        """
        affected = {step_id}
        found: list[str] = []
        for candidate in self.topological_order():
            step = self.step(candidate)
            if affected.intersection(step.depends_on):
                found.append(step.id)
                if transitive:
                    affected.add(step.id)
        file_order = [s.id for s in self.steps]
        return sorted(found, key=file_order.index)

    def summary(self) -> str:
        """One line for listings, e.g. ``hub_and_spoke v1: 3 steps, 4 agents``.

        Steps are those that run an agent, a loop's inner steps counted once
        and included workflows in full; containers are counted by kind.
        """
        kinds = Counter(_container_kinds(self.steps))
        steps = _count_steps(self.steps)
        parts = [_count(steps, "step") if steps else "steps planned by the coordinator"]
        parts += [_count(kinds[kind], noun) for kind, noun in _CONTAINER_NOUNS.items() if kinds[kind]]
        parts.append(_count(len(self.agents), "agent"))
        return f"{self.name} v{self.version}: {', '.join(parts)}"

    def to_data(self) -> dict[str, Any]:
        """JSON-ready data with the YAML key names; ``model_validate`` reads it back."""
        return self.model_dump(mode="json", by_alias=True)

    def _problems(
        self, known_tools: KnownTools | None, outer_inputs: Collection[str] = ()
    ) -> Iterator[tuple[Location, str]]:
        """Problems that span fields: references between steps, agents, inputs,
        containers and tools, and what would otherwise only fail at run time
        (a tool its agent's role cannot call, a script calling a tool its agent
        lacks, a timeout for no tool, an unknown ``$name``). ``outer_inputs``
        are the root workflow's inputs when this one is included (the runner
        substitutes them too). ``self`` may be a lenient stand-in (``_lenient``)."""
        yield from _reference_problems(self, known_tools)
        yield from tool_use_problems(self, known_tools)
        policy = getattr(self, "coordinator", None)  # a lenient stand-in has none
        coordinator = self.agents.get("coordinator")
        if policy and policy.require_workers and "spawn_worker" not in (coordinator.tools if coordinator else []):
            yield (
                ("coordinator", "requireWorkers"),
                "requireWorkers needs a coordinator agent that lists spawn_worker in its tools",
            )
        variables = frozenset({*self.inputs, *outer_inputs, *STEP_VARIABLES})
        yield from placeholder_problems(self.steps, ("steps",), variables)
        yield from coordinator_prompt_problems(self.agents, frozenset({*self.inputs, *outer_inputs}))


def _reference_problems(workflow: Any, known_tools: KnownTools | None) -> Iterator[tuple[Location, str]]:
    """References between steps, agents, inputs, containers and tools: what
    the runtime relies on, checked for stored versions too."""
    yield from _steps_problems(workflow.steps, ("steps",), workflow, depth=0)
    coordinator = workflow.agents.get("coordinator")
    if not workflow.steps and "spawn_worker" not in (coordinator.tools if coordinator else []):
        yield ("steps",), "a workflow needs at least one step, unless its coordinator agent plans with spawn_worker"
    total = _count_steps(workflow.steps)
    if total > MAX_STEPS and len(workflow.steps) <= MAX_STEPS:
        yield (
            ("steps",),
            f"{total} steps once loops and includes are counted; a workflow has at most {MAX_STEPS}",
        )

    if known_tools is not None:
        known = ", ".join(sorted(known_tools)) or "(none)"
        mcp = set(getattr(workflow, "mcp", None) or ())
        configured = sorted({server for tool in known_tools if (server := server_of(tool))})
        for j, server in enumerate(getattr(workflow, "mcp", None) or []):
            if server not in configured:
                yield (
                    ("mcp", j),
                    f"no MCP server {server!r} is configured (ZENWEB_MCP_SERVERS: {', '.join(configured) or 'none'})",
                )
        for name, agent in workflow.agents.items():
            for j, tool in enumerate(agent.tools):
                if tool not in known_tools and not mcp_tool_known(tool, mcp, known_tools):
                    yield (
                        ("agents", name, "tools", j),
                        _unknown_tool(tool, known, mcp, known_tools),
                    )
        for j, tool in enumerate(getattr(workflow, "approvals", None) or []):
            if tool not in known_tools and not mcp_tool_known(tool, mcp, known_tools):
                yield ("approvals", j), _unknown_tool(tool, known, mcp, known_tools)


def _unknown_tool(tool: str, known: str, declared: Collection[str], known_tools: Collection[str]) -> str:
    server = server_of(tool)
    configured = sorted({*declared, *(s for t in known_tools if (s := server_of(t)))})
    if server is not None and server not in configured:
        servers = ", ".join(configured) or "none"
        return f"unknown tool {tool!r}: no MCP server {server!r} is configured (MCP servers: {servers})"
    return f"unknown tool {tool!r}; known tools: {known}"


_CONTAINER_NOUNS = {"repeat": "repeat loop", "forEach": "forEach loop", "include": "include"}


def _container_kinds(steps: Iterable[Any]) -> Iterator[str]:
    for step in steps:
        if step.loop is not None:
            yield step.loop.kind
            yield from _container_kinds(step.loop.steps)
        elif step.include is not None:
            yield "include"
            if step.included is not None:
                yield from _container_kinds(step.included.steps)


def _count_steps(steps: Iterable[Any]) -> int:
    """Steps that run an agent: a loop's inner steps once, included workflows in full."""
    total = 0
    for step in steps:
        if getattr(step, "broken", False):
            total += 1
        elif step.loop is not None:
            total += _count_steps(getattr(step.loop, "steps", []))
        elif step.include is not None:
            total += _count_steps(step.included.steps) if step.included is not None else 0
        else:
            total += 1
    return total


def _steps_problems(steps: Sequence[Any], at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    """Problems of one list of sibling steps (top-level, or a loop's inner steps)."""
    first_index: dict[str, int] = {}
    for i, step in enumerate(steps):
        if step.id == "coordinator":
            yield (*at, i, "id"), "step id 'coordinator' is reserved for the run's coordinator"
        if step.id in first_index:
            first = first_index[step.id]
            message = f"duplicate step id {step.id!r} (first used by {_dotted(at)}[{first}])"
            yield (*at, i, "id"), message
        else:
            first_index[step.id] = i

    graph: dict[str, list[str]] = {}
    for i, step in enumerate(steps):
        yield from _step_problems(step, (*at, i), workflow, depth)
        for j, dep in enumerate(step.depends_on):
            if dep == step.id:
                yield (
                    (*at, i, "dependsOn", j),
                    f"step {dep!r} depends on itself",
                )
            elif dep not in first_index:
                yield (
                    (*at, i, "dependsOn", j),
                    f"unknown step {dep!r}{did_you_mean(dep, first_index)}",
                )
        if first_index[step.id] == i:
            graph[step.id] = [d for d in step.depends_on if d in first_index and d != step.id]

    for cycle in _cycles(graph):
        start, after = cycle[0], cycle[1]
        i = first_index[start]
        j = steps[i].depends_on.index(after)
        yield (
            (*at, i, "dependsOn", j),
            "dependency cycle: " + " -> ".join(cycle),
        )


def _step_problems(step: Any, at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    """Problems of one step's shape: plain or container, and its references."""
    if getattr(step, "broken", False):
        return
    defined_agents = ", ".join(sorted(workflow.agents))
    if step.loop is not None and step.include is not None:
        yield (*at, "include"), "a step has either loop or include, not both"
    container = "loop" if step.loop is not None else "include" if step.include is not None else None
    if container is not None:
        a_step = "a loop step" if container == "loop" else "an include step"
        holder = "its inner steps" if container == "loop" else "the included workflow's steps"
        if step.agent is not None:
            yield (*at, "agent"), f"{a_step} has no agent; {holder} name theirs"
        if step.instructions:
            yield (*at, "instructions"), f"{a_step} has no instructions; {holder} carry them"
    elif step.agent is None:
        yield (*at, "agent"), "required field missing"
    elif isinstance(step.agent, str) and step.agent not in workflow.agents:
        yield (*at, "agent"), f"unknown agent {step.agent!r}; defined agents: {defined_agents}"
    if step.with_ and step.include is None:
        yield (*at, "with"), "with gives inputs to an included workflow; this step has no include"
    if step.loop is not None:
        yield from _loop_problems(step.loop, (*at, "loop"), workflow, depth + 1)
    if step.include is not None:
        yield from _include_problems(step, at, workflow)


def _loop_problems(loop: Any, at: Location, workflow: Any, depth: int) -> Iterator[tuple[Location, str]]:
    if getattr(loop, "broken", False):
        return
    if depth > MAX_NESTING:
        yield at, f"containers nest at most {MAX_NESTING} deep"
    if loop.for_each is not None:
        for name, alias in (("max_iterations", "maxIterations"), ("until", "until"), ("until_agent", "untilAgent")):
            if getattr(loop, name) is not None:
                yield (*at, alias), f"{alias} belongs to repeat-until loops; a forEach loop runs once per item"
        declared = workflow.inputs.get(loop.for_each)
        if declared is None:
            names = ", ".join(sorted(workflow.inputs))
            known = f"declared inputs: {names}" if names else "this workflow declares no inputs"
            yield (
                (*at, "forEach"),
                f"unknown input {loop.for_each!r}{did_you_mean(loop.for_each, workflow.inputs)}; {known}",
            )
        elif declared.type not in (None, "string"):
            yield (
                (*at, "forEach"),
                f"input {loop.for_each!r} is {declared.type}; forEach needs a string input "
                "(a JSON list or comma-separated values)",
            )
    else:
        if loop.max_iterations is None:
            yield (
                (*at, "maxIterations"),
                f"required field missing: a repeat-until loop needs maxIterations (1 to {MAX_ITERATIONS})",
            )
        if loop.until is not None and loop.until_agent is not None:
            yield (*at, "untilAgent"), "give until or untilAgent, not both"
        elif isinstance(loop.until_agent, str) and loop.until_agent not in workflow.agents:
            defined = ", ".join(sorted(workflow.agents))
            yield (*at, "untilAgent"), f"unknown agent {loop.until_agent!r}; defined agents: {defined}"
        if loop.max_concurrency is not None:
            yield (
                (*at, "maxConcurrency"),
                "maxConcurrency applies to forEach loops; repeat-until iterations run one after another",
            )
        if loop.steps:
            # The last inner step's output ends the iteration: until looks at it,
            # the judge reads it, and the next iteration is given it.
            last = loop.steps[-1]
            where = (*at, "steps", len(loop.steps) - 1)
            if getattr(last, "broken", False):
                pass
            elif last.loop is not None or last.include is not None:
                yield where, "the last step of a repeat-until loop must run an agent: its output ends the iteration"
            elif any(last.id in step.depends_on for step in loop.steps):
                yield (
                    where,
                    "the last step of a repeat-until loop must be one no other inner step depends on: "
                    "its output ends the iteration",
                )
    yield from _steps_problems(loop.steps, (*at, "steps"), workflow, depth)


def include_path_problem(path: str) -> str | None:
    """Why an include path is not allowed, or None: it must be relative to the
    workflow's folder and stay inside it."""
    if not path.strip():
        return "include needs a file path"
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute() or PureWindowsPath(path).drive:
        return f"include path {path!r} is absolute; give a path relative to this workflow's folder"
    if ".." in re.split(r"[\\/]", path):
        return f"include path {path!r} leaves this workflow's folder ('..' is not allowed)"
    return None


def _include_problems(step: Any, at: Location, workflow: Any) -> Iterator[tuple[Location, str]]:
    if not isinstance(step.include, str):
        return
    problem = include_path_problem(step.include)
    if problem is not None:
        yield (*at, "include"), problem
    sub = step.included
    if sub is None:
        # The loader reports files it could not include; data validated
        # without the loader carries the included workflow with it.
        return
    takes = ", ".join(sorted(sub.inputs)) or "no inputs"
    for key in step.with_:
        if key not in sub.inputs:
            yield (*at, "with", key), f"unknown input {key!r} of {step.include} (it takes: {takes})"
    for name, declared in sub.inputs.items():
        if declared.required and declared.default is None and name not in step.with_:
            yield (*at, "include"), f"{step.include} needs input {name!r}: give it under with"
    for name, agent in sub.agents.items():
        mine = workflow.agents.get(name)
        if mine is None:
            yield (*at, "include"), f"agent {name!r} of {step.include} is missing from this workflow's agents"
        elif mine != agent:
            yield (
                (*at, "include"),
                f"agent {name!r} of {step.include} differs from this workflow's agent {name!r}; rename one of them",
            )


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Each dependency cycle once, as a path from the step of the cycle that comes
    first in the file back to itself (``graph`` is in file order)."""
    position = {step_id: n for n, step_id in enumerate(graph)}
    state: dict[str, Literal["active", "done"]] = {}
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(step_id: str) -> None:
        state[step_id] = "active"
        path.append(step_id)
        for dep in graph[step_id]:
            if state.get(dep) == "active":
                cycle = path[path.index(dep) :]
                first = cycle.index(min(cycle, key=position.__getitem__))
                cycle = cycle[first:] + cycle[:first]
                cycles.append([*cycle, cycle[0]])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[step_id] = "done"

    for step_id in graph:
        if step_id not in state:
            visit(step_id)
    return cycles


LoopSpec.model_rebuild()
StepSpec.model_rebuild()


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a workflow file."""

    source: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        field = f"{self.field}: " if self.field else ""
        return f"{where}: {field}{self.message}"


class WorkflowValidationError(ValueError):
    """A workflow file is invalid; ``problems`` lists everything found, by line."""

    def __init__(self, problems: Iterable[SpecProblem]) -> None:
        # Problems without a line concern the whole file, so they come first;
        # an included file's problems follow those of the file including it.
        problems = list(dict.fromkeys(problems))
        files = {source: n for n, source in enumerate(dict.fromkeys(p.source for p in problems))}
        self.problems = sorted(problems, key=lambda p: (files[p.source], p.line is not None, p.line or 0))
        super().__init__("\n".join(str(problem) for problem in self.problems))

    def __reduce__(self) -> tuple[type[WorkflowValidationError], tuple[Any, ...]]:
        # Exceptions pickle as cls(*args), and args holds the text, not the problems.
        return type(self), (self.problems,)


def parse_workflow(
    text: str,
    source: str = "<string>",
    known_tools: KnownTools | None = None,
    *,
    base_dir: str | Path | None = None,
    from_file: bool = True,
) -> WorkflowSpec:
    """Parse and validate workflow YAML.

    ``source`` names the text in problems (usually its file path). With
    ``known_tools``, every tool an agent lists must be one of them; given as
    a mapping of each name to the roles that may call it (``coordinator``,
    ``step``), an agent may list only tools its role can call. Include
    paths resolve against ``base_dir``, by default the folder of ``source``
    when it names a file; an included file's problems are reported under its
    own path. Text that came from a person or a client, not a file, passes
    ``from_file=False``: its source is then only a name, never a path to
    look at. Raises ``WorkflowValidationError`` listing every problem found.
    """
    source_file = Path(source)
    try:
        is_file = from_file and source_file.is_file()
    except OSError:  # a name too long or otherwise impossible as a path
        is_file = False
    if base_dir is None and is_file:
        base_dir = source_file.parent
    folder = Path(base_dir).resolve() if base_dir is not None else None
    context = _IncludeContext(
        root=folder,
        folder=folder,
        source_folder=Path(base_dir) if base_dir is not None else None,
        chain=(source_file.resolve(),) if is_file else (),
        known_tools=known_tools,
    )
    return _parse(text, source, context)


@dataclass(frozen=True)
class _IncludeContext:
    """Where include paths of the file being parsed resolve."""

    root: Path | None  # the root workflow's folder: no include may leave it
    folder: Path | None  # the folder of the file being parsed
    source_folder: Path | None  # the same folder, as problems name it
    chain: tuple[Path, ...]  # the files including this one, root first, and this file
    known_tools: KnownTools | None
    # The root workflow's inputs, in an included file (None in the root): the
    # runner substitutes them in every step's instructions.
    root_inputs: frozenset[str] | None = None


def _parse(text: str, source: str, context: _IncludeContext) -> WorkflowSpec:
    def problem(line: int | None, message: str) -> WorkflowValidationError:
        return WorkflowValidationError([SpecProblem(source, line, "", message)])

    try:
        data, lines = parse_with_locations(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise problem(line, f"invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise problem(None, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise problem(None, "invalid YAML: the document is nested too deeply") from None
    if data is None:
        raise problem(1, "the workflow is empty")
    if not isinstance(data, dict):
        raise problem(1, f"a workflow must be a mapping of fields, not {_kind(data)}")

    included, include_problems = _resolve_includes(data, source, lines, context)
    known_tools = context.known_tools
    outer = context.root_inputs or frozenset()
    try:
        spec = WorkflowSpec.model_validate(data, context={_DEFER_CHECKS: True})
    except ValidationError as exc:
        field_problems = [_from_pydantic(error, source, lines) for error in exc.errors(include_url=False)]
        # Still check references between the parts that did parse, so one run
        # of the validator reports every problem, not only the first kind.
        reported = {(p.line, p.field) for p in field_problems}
        cross = [
            SpecProblem(source, line_for(lines, loc), _dotted(loc), message)
            for loc, message in WorkflowSpec._problems(_lenient(data), known_tools, outer)  # type: ignore[arg-type]
        ]
        raise WorkflowValidationError(
            field_problems + [p for p in cross if (p.line, p.field) not in reported] + include_problems
        ) from None
    for loc, sub in included.items():
        _step_at(spec, loc).included = sub
        # The included steps run their own agents: the run looks them up here.
        for name, agent in sub.agents.items():
            spec.agents.setdefault(name, agent)
    problems = [
        SpecProblem(source, line_for(lines, loc), _dotted(loc), message)
        for loc, message in spec._problems(known_tools, outer)
    ]
    if problems or include_problems:
        raise WorkflowValidationError(problems + include_problems)
    return spec


def _resolve_includes(
    data: dict[str, Any],
    source: str,
    lines: Mapping[Location, int],
    context: _IncludeContext,
) -> tuple[dict[Location, WorkflowSpec], list[SpecProblem]]:
    """Parse every file the raw workflow includes: the parsed workflows by the
    location of their include step, and the problems found on the way."""
    found: dict[Location, WorkflowSpec] = {}
    problems: list[SpecProblem] = []
    for loc, path in _raw_includes(data.get("steps"), ("steps",)):
        if include_path_problem(path) is not None:
            continue  # reported with the other step problems

        def report(message: str, loc: Location = loc) -> None:
            where = (*loc, "include")
            problems.append(SpecProblem(source, line_for(lines, where), _dotted(where), message))

        if context.folder is None or context.root is None or context.source_folder is None:
            report(f"cannot include {path!r}: the workflow was not read from a file, so it has no folder")
            continue
        target = (context.folder / path).resolve()
        if not target.is_relative_to(context.root):
            # A symbolic link can point out of the folder that '..' may not leave.
            report(f"include path {path!r} leaves this workflow's folder")
            continue
        chain = [*context.chain, target]
        names = " -> ".join(_relative(file, context.root) for file in chain)
        if target in context.chain:
            report(f"include cycle: {names}")
            continue
        if len(context.chain) > MAX_INCLUDE_DEPTH:
            report(f"includes nest at most {MAX_INCLUDE_DEPTH} deep: {names}")
            continue
        sub_source = str(context.source_folder / path)
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            report(f"included file not found: {path}")
            continue
        except UnicodeDecodeError:
            report(f"the included file {path} is not UTF-8 text")
            continue
        except OSError as exc:
            report(f"cannot read the included file {path}: {exc.strerror or exc}")
            continue
        sub_context = _IncludeContext(
            root=context.root,
            folder=target.parent,
            source_folder=Path(sub_source).parent,
            chain=tuple(chain),
            known_tools=context.known_tools,
            root_inputs=_raw_input_names(data) if context.root_inputs is None else context.root_inputs,
        )
        try:
            found[loc] = _parse(text, sub_source, sub_context)
        except WorkflowValidationError as exc:
            count = _count(len(exc.problems), "problem")
            report(f"the included workflow {path} is invalid ({count}, listed under {sub_source})")
            problems.extend(exc.problems)
    return found, problems


def _raw_input_names(data: dict[str, Any]) -> frozenset[str]:
    inputs = data.get("inputs")
    return frozenset(name for name in inputs if isinstance(name, str)) if isinstance(inputs, dict) else frozenset()


def _raw_includes(steps: object, at: Location) -> Iterator[tuple[Location, str]]:
    """The location of every include step in raw step data, and its path."""
    if not isinstance(steps, list):
        return
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        if isinstance(step.get("include"), str):
            yield (*at, i), step["include"]
        loop = step.get("loop")
        if isinstance(loop, dict):
            yield from _raw_includes(loop.get("steps"), (*at, i, "loop", "steps"))


def _step_at(spec: WorkflowSpec, loc: Location) -> StepSpec:
    """The step at a location such as ``("steps", 2, "loop", "steps", 0)``."""
    node: Any = spec
    for part in loc:
        node = node[part] if isinstance(part, int) else getattr(node, part)
    return node  # type: ignore[no-any-return]


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


_BROKEN = object()


def _lenient(data: dict[str, Any]) -> SimpleNamespace:
    """The well-typed parts of raw workflow data, shaped like a WorkflowSpec
    for ``WorkflowSpec._problems``. Parts that field validation already
    reported are marked ``broken`` and not checked again."""

    raw_agents = data.get("agents") if isinstance(data.get("agents"), dict) else {}
    agents = {
        name: SimpleNamespace(
            tools=_strings(agent.get("tools") if isinstance(agent, dict) else None),
            provider=agent.get("provider") if isinstance(agent, dict) else None,
            script=_lenient_script(agent.get("script") if isinstance(agent, dict) else None),
        )
        for name, agent in raw_agents.items()
        if isinstance(name, str)  # another key's problem is field validation's to report
    }
    raw_inputs = data.get("inputs") if isinstance(data.get("inputs"), dict) else {}
    inputs = {
        name: SimpleNamespace(type=_input_type(declared), required=False, default=None)
        for name, declared in raw_inputs.items()
        if isinstance(name, str)
    }
    mcp = _strings(data.get("mcp"))
    raw_options = data.get("options") if isinstance(data.get("options"), dict) else {}
    timeouts = raw_options.get("toolTimeouts")
    options = SimpleNamespace(
        tool_timeouts=[t for t in timeouts if isinstance(t, str)] if isinstance(timeouts, dict) else []
    )
    return SimpleNamespace(
        steps=_lenient_steps(data.get("steps")), agents=agents, inputs=inputs, mcp=mcp, options=options
    )


def _lenient_script(raw_script: object) -> list[SimpleNamespace]:
    """Script turns with the tool names of their calls; None stands for a
    tool that is not text (field validation reports it)."""
    turns = []
    for turn in raw_script if isinstance(raw_script, list) else []:
        raw_calls = turn.get("calls") if isinstance(turn, dict) else None
        calls = []
        for call in raw_calls if isinstance(raw_calls, list) else []:
            tool = call.get("tool") if isinstance(call, dict) else None
            calls.append(SimpleNamespace(tool=tool if isinstance(tool, str) else None))
        turns.append(SimpleNamespace(calls=calls))
    return turns


def _lenient_steps(raw_steps: object) -> list[SimpleNamespace]:
    steps = []
    for i, raw in enumerate(raw_steps if isinstance(raw_steps, list) else []):
        step = raw if isinstance(raw, dict) else {}
        agent = step.get("agent")
        raw_loop = step.get("loop")
        loop = None
        if isinstance(raw_loop, dict):
            loop = SimpleNamespace(
                steps=_lenient_steps(raw_loop.get("steps")),
                max_iterations=raw_loop.get("maxIterations"),
                until=raw_loop.get("until"),
                until_agent=raw_loop.get("untilAgent"),
                for_each=raw_loop.get("forEach") if isinstance(raw_loop.get("forEach"), str) else None,
                max_concurrency=raw_loop.get("maxConcurrency"),
                kind="repeat" if raw_loop.get("forEach") is None else "forEach",
            )
        elif raw_loop is not None:
            loop = SimpleNamespace(broken=True, steps=[], kind="repeat")
        steps.append(
            SimpleNamespace(
                broken=not isinstance(raw, dict),
                id=step.get("id") if isinstance(step.get("id"), str) else f"#{i}",
                agent=agent if isinstance(agent, str) or agent is None else _BROKEN,
                instructions=step.get("instructions") if isinstance(step.get("instructions"), str) else "",
                depends_on=_strings(step.get("dependsOn")),
                loop=loop,
                include=step.get("include") if isinstance(step.get("include"), str) else None,
                with_=step.get("with") if isinstance(step.get("with"), dict) else {},
                included=None,
            )
        )
    return steps


def _mcp_config_refusal(servers: dict[Any, Any]) -> str:
    """Why a workflow's ``mcp:`` mapping of server configs is refused."""
    names = ", ".join(str(name) for name in servers)
    given = sorted({str(key) for entry in servers.values() if isinstance(entry, dict) for key in entry})
    why = (
        "MCP servers are configured by the operator (ZENWEB_MCP_SERVERS), not in a workflow: "
        f"name the configured servers this workflow uses (mcp: [{names}])"
    )
    if given:
        why += f"; found {', '.join(given)}"
    if "${" in str(servers):
        why += "; nothing a workflow says is expanded from the server's environment (${VAR})"
    return why


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _input_type(declared: object) -> str | None:
    kind = declared.get("type", "string") if isinstance(declared, dict) else None
    # Any YAML value may stand here: a list or a mapping cannot be looked up.
    return kind if isinstance(kind, str) and kind in _INPUT_TYPES else None


def load_workflow(path: str | Path, known_tools: KnownTools | None = None) -> WorkflowSpec:
    """Read and validate a workflow file; see ``parse_workflow``.

    A file that cannot be read is a ``WorkflowValidationError`` too.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        message = "file not found"
    except UnicodeDecodeError:
        message = "the file is not UTF-8 text"
    except OSError as exc:
        message = f"cannot read the file: {exc.strerror or exc}"
    else:
        return parse_workflow(text, str(path), known_tools)
    raise WorkflowValidationError([SpecProblem(str(path), None, "", message)])


def validate_workflow(path: str | Path, known_tools: KnownTools | None = None) -> list[SpecProblem]:
    """Every problem with a workflow file, sorted by line; empty when it is valid."""
    try:
        load_workflow(path, known_tools)
    except WorkflowValidationError as exc:
        return exc.problems
    return []


def _from_pydantic(error: ErrorDetails, source: str, lines: Mapping[Location, int]) -> SpecProblem:
    loc = error["loc"]
    message = error["msg"].replace(" after validation", "")
    kind = error["type"]
    ctx = error.get("ctx", {})
    if loc and loc[-1] == "[key]":
        # An invalid mapping key, such as an agent name.
        loc = loc[:-1]
        message = f"invalid name: {message}"
    if kind == "missing":
        message = "required field missing"
    elif kind == "extra_forbidden":
        message = f"unknown field {loc[-1]!r}{_allowed_fields(loc)}"
    elif kind == "value_error":
        message = str(ctx["error"])
    elif kind == "string_pattern_mismatch" and ctx["pattern"] in _PATTERN_HINTS:
        message = f"invalid name {error['input']!r}: {_PATTERN_HINTS[ctx['pattern']]}"
    return SpecProblem(source, line_for(lines, loc), _dotted(loc), message)


def _allowed_fields(loc: Sequence[str | int]) -> str:
    """' (did you mean ...?)' or ' (allowed: ...)' for an unknown field at ``loc``."""
    model: Any = WorkflowSpec
    for part in loc[:-1]:
        if isinstance(model, type) and issubclass(model, BaseModel):
            fields = {f.alias or n: f for n, f in model.model_fields.items()}
            if part not in fields:
                return ""
            model = fields[part].annotation
        elif get_origin(model) in (list, dict):
            model = get_args(model)[-1]
        else:
            return ""
        if isinstance(model, UnionType):
            model = next(arg for arg in get_args(model) if arg is not NoneType)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ""
    allowed = sorted(f.alias or n for n, f in model.model_fields.items() if n not in _LOADER_FIELDS)
    return did_you_mean(str(loc[-1]), allowed) or f" (allowed: {', '.join(allowed)})"


# Fields the loader fills in, which a workflow file does not write.
_LOADER_FIELDS = {"included"}


def _dotted(loc: Sequence[str | int]) -> str:
    """``("steps", 2, "dependsOn", 0)`` -> ``steps[2].dependsOn[0]``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _kind(value: object) -> str:
    kinds = {list: "a list", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
