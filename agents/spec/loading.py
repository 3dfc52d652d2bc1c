"""Reading a workflow: YAML with line numbers, includes resolved, every
problem reported at once with its file, line and field."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from agents.criteria import criterion_problem
from agents.spec.checks import include_path_problem, include_target
from agents.spec.errors import SpecProblem, WorkflowValidationError, dotted, plural
from agents.spec.fields import DEFER_CHECKS, MAX_INCLUDE_DEPTH, PATTERN_HINTS
from agents.spec.lenient import lenient
from agents.spec.shorthands import default_agent, loop_own_step, read_context_files, read_references
from agents.spec.usage import KnownTools, did_you_mean
from agents.spec.workflow import StepSpec, WorkflowSpec
from agents.spec.yaml_locations import Location, line_for, parse_with_locations


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
    loop_own_step(data, lines)
    read_references(data, context.folder)
    default_agent(data)

    included, include_problems = _resolve_includes(data, source, lines, context)
    # Reported with the other problems, whether or not the fields parsed.
    include_problems += [SpecProblem(source, line_for(lines, at), dotted(at), m) for at, m in _criteria_problems(data)]
    known_tools = context.known_tools
    outer = context.root_inputs or frozenset()
    try:
        spec = WorkflowSpec.model_validate(data, context={DEFER_CHECKS: True})
    except ValidationError as exc:
        field_problems = [_from_pydantic(error, source, lines) for error in exc.errors(include_url=False)]
        # Still check references between the parts that did parse, so one run
        # of the validator reports every problem, not only the first kind.
        reported = {(p.line, p.field) for p in field_problems}
        cross = [
            SpecProblem(source, line_for(lines, loc), dotted(loc), message)
            for loc, message in WorkflowSpec._problems(lenient(data), known_tools, outer)  # type: ignore[arg-type]
        ]
        raise WorkflowValidationError(
            field_problems + [p for p in cross if (p.line, p.field) not in reported] + include_problems
        ) from None
    read_context_files(spec.steps, context.folder)
    governance: list[tuple[Location, str]] = []
    for loc, sub in included.items():
        _step_at(spec, loc).included = sub
        # The included steps run their own agents: the run looks them up here.
        for name, agent in sub.agents.items():
            spec.agents.setdefault(name, agent)
        path = _step_at(spec, loc).include
        assert path is not None  # ``included`` holds only steps that include a file
        governance += [((*loc, "include"), message) for message in _gates_lost(spec, sub, path)]
    problems = [
        SpecProblem(source, line_for(lines, loc), dotted(loc), message)
        for loc, message in [*spec._problems(known_tools, outer), *governance]
    ]
    if problems or include_problems:
        raise WorkflowValidationError(problems + include_problems)
    return spec


def _criteria_problems(data: dict[str, Any]) -> Iterator[tuple[Location, str]]:
    """``successCriteria`` entries zenweb cannot check after a run (agents.criteria)."""
    key = "successCriteria" if "successCriteria" in data else "success_criteria"
    entries = data.get(key)
    for j, entry in enumerate(entries if isinstance(entries, list) else []):
        problem = criterion_problem(entry) if isinstance(entry, str) else None
        if problem:
            yield (key, j), problem


def _gates_lost(spec: WorkflowSpec, sub: WorkflowSpec, path: str) -> list[str]:
    """What of the approval gate of ``sub`` (included from ``path``) ``spec``
    would drop: a run asks for approval by the including workflow's own
    settings only, so each must be stated there too (a destructive file
    included by a plain one would otherwise run unapproved)."""
    lost = []
    if sub.destructive and not spec.destructive:
        lost.append(f"{path} is destructive: mark this workflow destructive: true too")
    ungated = [tool for tool in sub.approvals if tool not in spec.approvals]
    if ungated:
        lost.append(f"{path} has each {', '.join(ungated)} call approved: list it in approvals: here too")
    if sub.approval.approvers > spec.approval.approvers:
        lost.append(
            f"{path} needs {sub.approval.approvers} approvers: "
            f"set approval: {{approvers: {sub.approval.approvers}}} here too"
        )
    return lost


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
    for loc, named in _raw_includes(data.get("steps"), ("steps",)):
        path = include_target(named, data.get("includes"))
        if include_path_problem(path) is not None:
            continue  # reported with the other step problems

        def report(message: str, loc: Location = loc) -> None:
            where = (*loc, "include")
            problems.append(SpecProblem(source, line_for(lines, where), dotted(where), message))

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
        if not target.exists():
            continue  # a warning, and a run is refused (agents.spec.not_run)
        sub_source = str(context.source_folder / path)
        text, unreadable = _read_included(target, path)
        if unreadable:
            report(unreadable)
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
            count = plural(len(exc.problems), "problem")
            report(f"the included workflow {path} is invalid ({count}, listed under {sub_source})")
            problems.extend(exc.problems)
    return found, problems


def _read_included(target: Path, path: str) -> tuple[str, str]:
    """The text of the file ``path`` names, or "" and why it cannot be read."""
    try:
        return target.read_text(encoding="utf-8"), ""
    except FileNotFoundError:
        return "", f"included file not found: {path}"
    except UnicodeDecodeError:
        return "", f"the included file {path} is not UTF-8 text"
    except OSError as exc:
        return "", f"cannot read the included file {path}: {exc.strerror or exc}"


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
    elif kind == "string_pattern_mismatch" and ctx["pattern"] in PATTERN_HINTS:
        message = f"invalid name {error['input']!r}: {PATTERN_HINTS[ctx['pattern']]}"
    return SpecProblem(source, line_for(lines, loc), dotted(loc), message)


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
_LOADER_FIELDS = {"included", "context_file_texts"}


def _kind(value: object) -> str:
    kinds = {list: "a list", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), type(value).__name__)
