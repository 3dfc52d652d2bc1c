"""The workflow and its steps (plain steps, loops, includes): the schema, and
what a validated workflow answers about its steps."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agents.spec.agent import AgentSpec
from agents.spec.checks import count_steps, reference_problems
from agents.spec.errors import dotted, plural
from agents.spec.fields import (
    DEFER_CHECKS,
    MAX_DESCRIPTION,
    MAX_FOR_EACH_ITEMS,
    MAX_ITERATIONS,
    MAX_STEPS,
    InputName,
    Mode,
    Name,
    Seconds,
    SpecModel,
    StepId,
)
from agents.spec.inputs import InputSpec
from agents.spec.options import ApprovalPolicy, CoordinatorPolicy, ToolExposure, WorkflowOptions
from agents.spec.usage import (
    STEP_VARIABLES,
    KnownTools,
    coordinator_prompt_problems,
    placeholder_problems,
    tool_use_problems,
)
from agents.spec.v1_rules import v1_problems
from agents.spec.yaml_locations import Location
from agents.tools.mcp.config import ServerName


class LoopSpec(SpecModel):
    """A container that runs its inner ``steps`` once per iteration.

    Repeat-until (no ``forEach``): iteration N runs as ``<id>.N.<inner>``, one
    iteration after another. ``maxIterations`` (1 to 100) is required. The loop
    is done after an iteration when its ``until`` holds (a CEL expression, or
    text the output of its last listed inner step contains, case-sensitive),
    or when the ``untilAgent`` judge says done; after ``maxIterations``
    iterations it fails if it has either, and completes if it has neither
    (agents/core/loops.py).
    What steps that depend on it read is ``outputMode``'s: ``last`` (the
    default), the last inner step's output of the last iteration;
    ``cumulative``, that step's output of every iteration.

    forEach: one iteration per item of the string input ``forEach`` names (a
    JSON list or comma-separated values), or of the list it gives itself
    (``forEach: [eu, us]``), as ``<id>[N].<inner>``, at most
    ``maxConcurrency`` (default 5) running at once. Instructions see ``$item``
    and ``$index``.
    """

    # Without steps (zenflow's single-step loop) the loop runs its own step:
    # the loader moves the step's agent, instructions and the rest into one
    # inner step of the same id.
    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_STEPS)
    max_iterations: int | None = Field(default=None, ge=1, le=MAX_ITERATIONS)
    # zenweb: text the last inner step's output contains; zenflow: a CEL
    # expression (agents.spec.expressions tells them apart).
    until: str | None = Field(default=None, min_length=1)
    until_agent: str | None = None
    # An input's name, a CEL expression (zenflow), or a list of items.
    for_each: str | list[Any] | None = None
    # 0, as zenflow writes it: unset.
    max_concurrency: int | None = Field(default=None, ge=0)
    # Wait between repeat-until iterations (zenflow's delay).
    delay: Seconds | None = Field(default=None, ge=0)
    output_mode: Literal["last", "cumulative"] = "last"

    @field_validator("output_mode", mode="before")
    @classmethod
    def _empty_output_mode_is_last(cls, value: Any) -> Any:
        return "last" if value == "" else value

    @field_validator("for_each", mode="before")
    @classmethod
    def _for_each_is_a_name_or_a_list(cls, value: Any) -> Any:
        if isinstance(value, list) and len(value) > MAX_FOR_EACH_ITEMS:
            raise ValueError(f"forEach gives {len(value)} items; at most {MAX_FOR_EACH_ITEMS}")
        if value is not None and not isinstance(value, str | list):
            raise ValueError("forEach names a string input, or gives a list of items such as [eu, us]")
        return value

    @property
    def kind(self) -> Literal["repeat", "forEach"]:
        return "repeat" if self.for_each is None else "forEach"


class StepSpec(SpecModel):
    """A plain step runs one agent once its dependencies have finished.

    A container step has exactly one of ``loop`` and ``include`` instead of an
    agent; steps that depend on it wait for the whole container. ``include``
    names a workflow file relative to this file's folder; ``with`` gives the
    included workflow's inputs (``$name`` of this workflow's inputs is
    substituted). The loader puts the parsed file in ``included``.
    """

    id: StepId
    agent: str | None = None
    instructions: str = ""
    # This step's model, in place of its agent's (zenflow's step model).
    model: str | None = Field(default=None, min_length=1, max_length=200)
    depends_on: list[str] = Field(default_factory=list)
    # zenflow's: a CEL expression (false: the step is skipped), the step's
    # own timeout, retries of the whole step, tool-call retries inside it,
    # and files (relative to the workflow's folder) read into its prompt.
    condition: str | None = Field(default=None, min_length=1)
    timeout: Seconds | None = Field(default=None, gt=0)
    retries: int = Field(default=0, ge=0)
    max_retries: int | None = Field(default=None, ge=0)
    context_files: list[str] = Field(default_factory=list)
    loop: LoopSpec | None = None
    include: str | None = None
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    included: WorkflowSpec | None = None
    # The text of each of contextFiles the loader could read, by its path.
    context_file_texts: dict[str, str] = Field(default_factory=dict)

    @field_validator("included", "context_file_texts", mode="before")
    @classmethod
    def _filled_in_by_the_loader(cls, value: Any, info: ValidationInfo) -> Any:
        if value and (info.context or {}).get(DEFER_CHECKS):
            name, source = (
                ("included", "include") if info.field_name == "included" else ("contextFileTexts", "contextFiles")
            )
            raise ValueError(f"unknown field {name!r}: the loader fills it in from {source}")
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


class WorkflowSpec(SpecModel):
    """A validated workflow. Build one with ``parse_workflow`` or ``load_workflow``.

    ``steps`` may be empty when the coordinator plans the work itself (its
    agent lists spawn_worker)."""

    name: Name
    # The version of the workflow language: zenflow's v1 is the only one
    # (agents.spec.v1_rules). Stored in an integer column: PostgreSQL's holds
    # at most 2**31 - 1.
    version: int = Field(default=1, ge=1, le=2**31 - 1)
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    inputs: dict[InputName, InputSpec] = Field(default_factory=dict)
    # A step without an agent runs as the default agent (DEFAULT_AGENT).
    agents: dict[Name, AgentSpec] = Field(default_factory=dict)
    # Named sub-workflow files, for steps' include (zenflow's includes).
    includes: dict[Name, str] = Field(default_factory=dict)
    steps: list[StepSpec] = Field(default_factory=list, max_length=MAX_STEPS)
    options: WorkflowOptions = Field(default_factory=WorkflowOptions)
    coordinator: CoordinatorPolicy = Field(default_factory=CoordinatorPolicy)
    tool: ToolExposure | None = None
    # The catalog entry (docs/commands-and-approvals.md): what a command must say to select this
    # workflow, what it returns, how to tell it worked, the mode it needs,
    # and which work waits for a person's approval.
    triggers: list[str] = Field(default_factory=list)
    outputs: list[str] = Field(default_factory=list)
    # Each entry one zenweb checks after a run (agents.criteria); loading refuses others.
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
        if (info.context or {}).get(DEFER_CHECKS):
            raise ValueError(_mcp_config_refusal(value))
        # A version stored when workflows could configure servers: only the
        # names are kept, so its tools come from the operator's servers.
        return list(value)

    @model_validator(mode="after")
    def _check_references(self, info: ValidationInfo) -> WorkflowSpec:
        if not (info.context or {}).get(DEFER_CHECKS):
            # Stored versions come back this way: they were checked in full when
            # registered, and a rule added since must not make one unreadable.
            problems = [f"{dotted(loc)}: {msg}" for loc, msg in reference_problems(self, None)]
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
        steps = count_steps(self.steps)
        parts = [plural(steps, "step") if steps else "steps planned by the coordinator"]
        parts += [plural(kinds[kind], noun) for kind, noun in _CONTAINER_NOUNS.items() if kinds[kind]]
        parts.append(plural(len(self.agents), "agent"))
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
        substitutes them too). ``self`` may be a lenient stand-in (``agents.spec.lenient.lenient``)."""
        yield from reference_problems(self, known_tools)
        yield from v1_problems(self)
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


LoopSpec.model_rebuild()
StepSpec.model_rebuild()
