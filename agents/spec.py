"""The workflow file: its schema, and a loader that says what is wrong and where.

A workflow is a YAML document naming agents and the steps that run them. YAML keys
are camelCase (``dependsOn``), Python attributes snake_case (``depends_on``).
``parse_workflow`` and ``load_workflow`` report every problem they find at once,
each with a line number and the YAML path of the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
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
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from agents.yaml_locations import Location, line_for, parse_with_locations

STEP_ID_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
INPUT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
MAX_STEPS = 100
MAX_DESCRIPTION = 2000

_PATTERN_HINTS = {
    STEP_ID_PATTERN: "use lowercase letters, digits, '_' and '-', starting with a letter, at most 64 characters",
    INPUT_NAME_PATTERN: "use lowercase letters, digits and '_', starting with a letter, at most 64 characters",
}

Name = Annotated[str, StringConstraints(pattern=STEP_ID_PATTERN)]
InputName = Annotated[str, StringConstraints(pattern=INPUT_NAME_PATTERN)]
InputType = Literal["string", "integer", "number", "boolean"]
Provider = Literal["scripted", "openai"]
OnStepFailure = Literal["cascade", "skip-dependents", "abort"]

_INPUT_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}

# Set by parse_workflow, which runs the cross-field checks itself so that each
# problem gets its own line; other callers of model_validate get them as one error.
_DEFER_CHECKS = "zenweb.spec.defer_checks"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)


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


class StepSpec(_Spec):
    """A step runs one agent once its dependencies have finished."""

    id: Name
    agent: str
    instructions: str = ""
    depends_on: list[str] = Field(default_factory=list)


class WorkflowOptions(_Spec):
    """Run-wide limits. Timeouts are in seconds; None means no limit."""

    max_concurrency: int = Field(default=5, ge=1)
    max_turns: int = Field(default=50, ge=1, le=500)
    on_step_failure: OnStepFailure = "cascade"
    timeout: float | None = Field(default=None, gt=0)
    step_timeout: float | None = Field(default=None, gt=0)


class WorkflowSpec(_Spec):
    """A validated workflow. Build one with ``parse_workflow`` or ``load_workflow``."""

    name: Name
    version: int = Field(default=1, ge=1)
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    inputs: dict[InputName, InputSpec] = Field(default_factory=dict)
    agents: dict[Name, AgentSpec] = Field(min_length=1)
    steps: list[StepSpec] = Field(min_length=1, max_length=MAX_STEPS)
    options: WorkflowOptions = Field(default_factory=WorkflowOptions)

    @model_validator(mode="after")
    def _check_references(self, info: ValidationInfo) -> WorkflowSpec:
        if not (info.context or {}).get(_DEFER_CHECKS):
            problems = [f"{_dotted(loc)}: {msg}" for loc, msg in self._problems(None)]
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
        """One line for listings, e.g. ``hub_and_spoke v1: 3 steps, 4 agents``."""
        return f"{self.name} v{self.version}: {_count(len(self.steps), 'step')}, {_count(len(self.agents), 'agent')}"

    def to_data(self) -> dict[str, Any]:
        """JSON-ready data with the YAML key names; ``model_validate`` reads it back."""
        return self.model_dump(mode="json", by_alias=True)

    def _problems(self, known_tools: Collection[str] | None) -> Iterator[tuple[Location, str]]:
        """Problems that span fields: references between steps, agents and tools."""
        first_index: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.id in first_index:
                first = first_index[step.id]
                message = f"duplicate step id {step.id!r} (first used by steps[{first}])"
                yield ("steps", i, "id"), message
            else:
                first_index[step.id] = i

        defined_agents = ", ".join(sorted(self.agents))
        graph: dict[str, list[str]] = {}
        for i, step in enumerate(self.steps):
            if step.agent not in self.agents:
                yield (
                    ("steps", i, "agent"),
                    f"unknown agent {step.agent!r}; defined agents: {defined_agents}",
                )
            for j, dep in enumerate(step.depends_on):
                if dep == step.id:
                    yield (
                        ("steps", i, "dependsOn", j),
                        f"step {dep!r} depends on itself",
                    )
                elif dep not in first_index:
                    yield (
                        ("steps", i, "dependsOn", j),
                        f"unknown step {dep!r}{_did_you_mean(dep, first_index)}",
                    )
            if first_index[step.id] == i:
                graph[step.id] = [d for d in step.depends_on if d in first_index and d != step.id]

        for cycle in _cycles(graph):
            start, after = cycle[0], cycle[1]
            i = first_index[start]
            j = self.steps[i].depends_on.index(after)
            yield (
                ("steps", i, "dependsOn", j),
                "dependency cycle: " + " -> ".join(cycle),
            )

        if known_tools is not None:
            known = ", ".join(sorted(known_tools)) or "(none)"
            for name, agent in self.agents.items():
                for j, tool in enumerate(agent.tools):
                    if tool not in known_tools:
                        yield (
                            ("agents", name, "tools", j),
                            f"unknown tool {tool!r}; known tools: {known}",
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
        # Problems without a line concern the whole file, so they come first.
        self.problems = sorted(problems, key=lambda p: (p.line is not None, p.line or 0))
        super().__init__("\n".join(str(problem) for problem in self.problems))

    def __reduce__(self) -> tuple[type[WorkflowValidationError], tuple[Any, ...]]:
        # Exceptions pickle as cls(*args), and args holds the text, not the problems.
        return type(self), (self.problems,)


def parse_workflow(
    text: str,
    source: str = "<string>",
    known_tools: Collection[str] | None = None,
) -> WorkflowSpec:
    """Parse and validate workflow YAML.

    ``source`` names the text in problems (usually its file path). With
    ``known_tools``, every tool an agent lists must be one of them. Raises
    ``WorkflowValidationError`` listing every problem found.
    """

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

    try:
        spec = WorkflowSpec.model_validate(data, context={_DEFER_CHECKS: True})
    except ValidationError as exc:
        field_problems = [_from_pydantic(error, source, lines) for error in exc.errors(include_url=False)]
        # Still check references between the parts that did parse, so one run
        # of the validator reports every problem, not only the first kind.
        reported = {(p.line, p.field) for p in field_problems}
        cross = [
            SpecProblem(source, line_for(lines, loc), _dotted(loc), message)
            for loc, message in WorkflowSpec._problems(_lenient(data), known_tools)  # type: ignore[arg-type]
        ]
        raise WorkflowValidationError(
            field_problems + [p for p in cross if (p.line, p.field) not in reported]
        ) from None
    problems = [
        SpecProblem(source, line_for(lines, loc), _dotted(loc), message) for loc, message in spec._problems(known_tools)
    ]
    if problems:
        raise WorkflowValidationError(problems)
    return spec


def _lenient(data: dict[str, Any]) -> SimpleNamespace:
    """The well-typed parts of raw workflow data, shaped like a WorkflowSpec
    for ``WorkflowSpec._problems``."""

    def strings(value: object) -> list[str]:
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    raw_agents = data.get("agents") if isinstance(data.get("agents"), dict) else {}
    agents = {
        name: SimpleNamespace(tools=strings(agent.get("tools") if isinstance(agent, dict) else None))
        for name, agent in raw_agents.items()
    }
    raw_steps = data.get("steps") if isinstance(data.get("steps"), list) else []
    steps = [
        SimpleNamespace(
            id=step.get("id") if isinstance(step, dict) and isinstance(step.get("id"), str) else f"#{i}",
            agent=step.get("agent") if isinstance(step, dict) and isinstance(step.get("agent"), str) else None,
            depends_on=strings(step.get("dependsOn") if isinstance(step, dict) else None),
        )
        for i, step in enumerate(raw_steps)
    ]
    # A step without a usable agent was already reported by field validation.
    for step in steps:
        if step.agent is None:
            step.agent = next(iter(agents), "")
    return SimpleNamespace(steps=steps, agents=agents)


def load_workflow(path: str | Path, known_tools: Collection[str] | None = None) -> WorkflowSpec:
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


def validate_workflow(path: str | Path, known_tools: Collection[str] | None = None) -> list[SpecProblem]:
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
    allowed = sorted(f.alias or n for n, f in model.model_fields.items())
    return _did_you_mean(str(loc[-1]), allowed) or f" (allowed: {', '.join(allowed)})"


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


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
