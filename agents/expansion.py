"""Containers at run time: which steps exist, what they wait for, when a loop ends.

Pure functions over a validated ``WorkflowSpec``; the Django side stores what
they return and calls them again as the run moves on. Which of those steps
may start is agents/core (``ready`` and the state machine).

- ``expand(spec, inputs)``: the steps that exist when a run starts. Plain steps
  keep their id; an include's steps run as ``inc.inner``; a forEach loop runs
  every iteration as ``loop[N].inner`` (iterations do not wait for each other);
  a repeat-until loop starts with iteration 0 as ``loop.0.inner``.
- ``next_iteration(...)`` (agents/repeat_loops.py): after an iteration of a
  repeat-until loop ends, whether the loop is done, a judge must be asked, or
  iteration N+1 runs.

Dependencies are runtime ids. A dependency on a container is rewritten to the
container's final steps (the inner steps nothing else in it depends on, in
every iteration), except for a repeat-until loop: its last iteration is not
known in advance, so dependents wait for the loop's own runtime id, which the
caller marks ``completed`` when ``next_iteration`` says ``done``. Inner steps
without inner dependencies wait for what the container waits for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from string import Template
from typing import Any, Literal

from agents import bounded_json, ids
from agents.spec import DEFAULT_FOR_EACH_CONCURRENCY, MAX_FOR_EACH_ITEMS, StepSpec, WorkflowSpec

# Steps in one run, once its loops are expanded (a forEach loop's iterations
# multiply with the loops around it: three nested loops of 100 items are a
# million steps). Every step is a row the run's scheduling reads, and a
# capped loop reads them all after each step ends (docs/workflows.md).
MAX_RUN_STEPS = 1_000
# Runtime ids are stored in columns of this width (runs.models.Step.step_id).
MAX_RUNTIME_ID = 200
# The previous iteration's output handed to the next one, like a dependency's.
MAX_PREVIOUS_OUTPUT = 8 * 1024
TRUNCATED = "...[truncated for context limit]"


class ExpansionError(ValueError):
    """The inputs do not make a run: a forEach input that is not a list or has
    too many items, loops that expand to more than ``MAX_RUN_STEPS`` steps, or
    containers nested so deep that a runtime id is too long."""


@dataclass(frozen=True)
class RuntimeStep:
    """One step of a run, under its runtime id.

    ``instructions`` have the container's variables substituted (``$item`` and
    ``$index`` in a forEach, ``$iteration`` and ``$previous_output`` in a
    repeat-until loop, an included workflow's inputs); run inputs, ``$inbox``
    and the like are left for the runner. ``variables`` holds those container
    values for the scripted provider. ``container`` is the runtime id of the
    innermost enclosing container ("" at top level) and ``iteration`` the
    iteration of it (None in an include). ``group`` and ``max_concurrency`` name
    the innermost forEach loop and its cap on running iterations; ``limits``
    lists every enclosing forEach loop's (group, cap), outermost first.
    """

    runtime_id: str
    agent: str
    instructions: str
    model: str = ""  # the step's own model, or "": its agent's
    depends_on: tuple[str, ...] = ()
    container: str = ""
    kind: Literal["step"] = "step"
    iteration: int | None = None
    group: str = ""
    max_concurrency: int | None = None
    previous_output: str | None = None
    variables: Mapping[str, str] = field(default_factory=dict, hash=False)
    limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Scope:
    """Where a list of sibling steps runs."""

    workflow: WorkflowSpec
    values: Mapping[str, Any]  # input values of ``workflow``
    variables: Mapping[str, str]  # container variables for instructions
    namespace: str = ""  # "" at top level, else "refine.0", "deploy[1]", "staging"
    container: str = ""
    iteration: int | None = None
    limits: tuple[tuple[str, int], ...] = ()
    previous_output: str | None = None

    def runtime_id(self, inner: str) -> str:
        return f"{self.namespace}.{inner}" if self.namespace else inner


@dataclass
class _Expanded:
    steps: list[RuntimeStep] = field(default_factory=list)
    deps: dict[str, tuple[str, ...]] = field(default_factory=dict)  # resolved deps of each sibling
    finals: dict[str, tuple[str, ...]] = field(default_factory=dict)  # what depending on a sibling waits for
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # container runtime id -> finals


def expand(spec: WorkflowSpec, inputs: Mapping[str, Any]) -> list[RuntimeStep]:
    """The runtime steps that exist when a run starts, every step after its
    dependencies (file order among equals).

    ``inputs`` are the run's input values (missing ones take their declared
    default). Raises ``ExpansionError`` when a forEach input is not a list
    or the run would have more than ``MAX_RUN_STEPS`` steps.
    """
    steps = expand_list(spec.steps, root_scope(spec, inputs), ()).steps
    _check_size(len(steps), "the workflow's steps expand")
    return steps


def container_ids(spec: WorkflowSpec) -> set[str]:
    """Container ids for ``agents.ids.resolve``: the runtime id of every
    container outside loops (``refine``, ``staging``, ``staging.inner``) and the
    bare id of every container inside a loop (its runtime id changes with the
    iteration)."""
    return set(container_kinds(spec))


def container_kinds(spec: WorkflowSpec) -> dict[str, ids.ContainerKind]:
    """``container_ids`` with each container's kind, ``loop`` or ``include``,
    for the text of ``rejected: ...``."""
    found: dict[str, ids.ContainerKind] = {}

    def walk(steps: Sequence[StepSpec], namespace: str | None) -> None:
        # namespace: "" at top level, the include's runtime id inside one, None
        # inside a loop, where runtime ids change with the iteration.
        for step in steps:
            if not step.is_container:
                continue
            kind: ids.ContainerKind = "loop" if step.loop is not None else "include"
            runtime_id = ids.include_id(namespace, step.id) if namespace else step.id
            if namespace is not None:
                found.setdefault(runtime_id, kind)
            found.setdefault(step.id, kind)
            if step.loop is not None:
                walk(step.loop.steps, None)
            elif step.included is not None:
                walk(step.included.steps, None if namespace is None else runtime_id)

    walk(spec.steps, "")
    return found


def loop_kinds(spec: WorkflowSpec) -> set[str]:
    """The kinds of loop anywhere in ``spec``: ``repeat`` (a run of it adds
    each iteration's steps while it runs), ``forEach``."""
    found: set[str] = set()

    def walk(steps: Sequence[StepSpec]) -> None:
        for step in steps:
            if step.loop is not None:
                found.add(step.loop.kind)
                walk(step.loop.steps)
            elif step.included is not None:
                walk(step.included.steps)

    walk(spec.steps)
    return found


def final_ids(spec: WorkflowSpec, container_id: str, inputs: Mapping[str, Any]) -> tuple[str, ...]:
    """What a plain step that depends on the container ``container_id`` (a
    runtime id outside loops, as in ``container_ids``) waits for: the final
    steps of an include, of every forEach iteration, or the runtime id of a
    repeat-until loop. Raises KeyError for an id that is not such a container."""
    expanded = expand_list(spec.steps, root_scope(spec, inputs), ())
    return expanded.containers[container_id]


# -- expansion ---------------------------------------------------------------------


def root_scope(spec: WorkflowSpec, inputs: Mapping[str, Any]) -> Scope:
    return Scope(spec, _with_defaults(spec, inputs), {})


def _with_defaults(spec: WorkflowSpec, values: Mapping[str, Any]) -> dict[str, Any]:
    merged = {name: declared.default for name, declared in spec.inputs.items() if declared.default is not None}
    merged.update(values)
    return merged


def expand_list(steps: Sequence[StepSpec], scope: Scope, entry_deps: tuple[str, ...]) -> _Expanded:
    """Expand sibling steps. Steps without dependencies among their siblings
    wait for ``entry_deps``, what the enclosing container waits for."""
    result = _Expanded()
    for step in _in_dependency_order(steps):
        deps = entry_deps
        if step.depends_on:
            deps = _dedupe(dep for name in step.depends_on for dep in result.finals[name])
        result.deps[step.id] = deps
        runtime_id = scope.runtime_id(step.id)
        if step.loop is not None and step.loop.kind == "repeat":
            inner = expand_list(step.loop.steps, repeat_scope(scope, step, runtime_id, 0, None), deps)
            finals: tuple[str, ...] = (runtime_id,)
        elif step.loop is not None:
            inner = _Expanded()
            for n, item in enumerate(items_of(step, scope)):
                iteration = each_scope(scope, step, runtime_id, n, item)
                _merge(inner, expand_list(step.loop.steps, iteration, deps))
                # Checked as it grows, so nested loops stop at the limit
                # instead of building every step first.
                _check_size(len(result.steps) + len(inner.steps), f"forEach loop {runtime_id!r} expands")
            finals = _dedupe(inner.finals.get("", ()))
        elif step.included is not None:
            inner = expand_list(step.included.steps, include_scope(scope, step, runtime_id), deps)
            finals = _dedupe(inner.finals.get("", ()))
        else:
            result.steps.append(_plain(step, scope, runtime_id, deps, entry=not step.depends_on))
            result.finals[step.id] = (runtime_id,)
            continue
        result.steps.extend(inner.steps)
        result.containers.update(inner.containers)
        # An empty container (a forEach over no items) is done as soon as what
        # it waits for is: its dependents wait for that instead.
        result.finals[step.id] = finals or deps
        result.containers[runtime_id] = finals or deps
    depended_on = {dep for step in steps for dep in step.depends_on}
    result.finals[""] = _dedupe(dep for step in steps if step.id not in depended_on for dep in result.finals[step.id])
    return result


def _check_size(count: int, what: str) -> None:
    """``what`` ("forEach loop 'deploy' expands") to ``count`` steps: an
    ExpansionError past ``MAX_RUN_STEPS``."""
    if count > MAX_RUN_STEPS:
        raise ExpansionError(
            f"{what} to more than {MAX_RUN_STEPS:,} steps; a run has at most {MAX_RUN_STEPS:,} "
            "(a forEach loop's items multiply the steps of each iteration, and of the loops around it)"
        )


def _merge(into: _Expanded, part: _Expanded) -> None:
    into.steps.extend(part.steps)
    into.containers.update(part.containers)
    into.finals[""] = into.finals.get("", ()) + part.finals[""]


def _plain(step: StepSpec, scope: Scope, runtime_id: str, deps: tuple[str, ...], *, entry: bool) -> RuntimeStep:
    if len(runtime_id) > MAX_RUNTIME_ID:
        raise ExpansionError(f"runtime id {runtime_id[:60]}... is longer than {MAX_RUNTIME_ID} characters")
    variables = dict(scope.variables)
    instructions = Template(step.instructions).safe_substitute(variables)
    if entry and scope.previous_output is not None and "previous_output" not in step.instructions:
        instructions += f"\n\nOutput of the previous iteration:\n{scope.previous_output}"
    for path, text in step.context_file_texts.items():
        # The turn substitutes the instructions once more: a file's "$" stays "$".
        instructions += f"\n\n## Context file {path}\n" + text.replace("$", "$$")
    innermost = scope.limits[-1] if scope.limits else ("", None)
    return RuntimeStep(
        runtime_id=runtime_id,
        agent=step.agent or "",
        instructions=instructions,
        model=step.model or "",
        depends_on=deps,
        container=scope.container,
        iteration=scope.iteration,
        group=innermost[0],
        max_concurrency=innermost[1],
        previous_output=scope.previous_output,
        variables=variables,
        limits=scope.limits,
    )


def repeat_scope(scope: Scope, step: StepSpec, runtime_id: str, n: int, previous: str | None) -> Scope:
    variables = dict(scope.variables, iteration=str(n))
    previous = clip(previous) if previous is not None else None
    variables.pop("previous_output", None)
    if previous is not None:
        variables["previous_output"] = previous
    return replace(
        scope,
        variables=variables,
        namespace=f"{runtime_id}.{n}",
        container=runtime_id,
        iteration=n,
        previous_output=previous,
    )


def each_scope(scope: Scope, step: StepSpec, runtime_id: str, n: int, item: str) -> Scope:
    assert step.loop is not None
    cap = step.loop.max_concurrency or DEFAULT_FOR_EACH_CONCURRENCY
    return replace(
        scope,
        variables=dict(scope.variables, item=item, index=str(n)),
        namespace=f"{runtime_id}[{n}]",
        container=runtime_id,
        iteration=n,
        limits=(*scope.limits, (runtime_id, cap)),
        previous_output=None,
    )


def include_scope(scope: Scope, step: StepSpec, runtime_id: str) -> Scope:
    """An included workflow sees its own inputs only: ``with`` values, with
    ``$name`` substituted from the including scope, over its defaults."""
    assert step.included is not None
    substitutions = {**{k: _text(v) for k, v in scope.values.items()}, **scope.variables}
    given = {
        name: Template(value).safe_substitute(substitutions) if isinstance(value, str) else value
        for name, value in step.with_.items()
    }
    values = _with_defaults(step.included, given)
    return replace(
        scope,
        workflow=step.included,
        values=values,
        variables={name: _text(value) for name, value in values.items()},
        namespace=runtime_id,
        container=runtime_id,
        iteration=None,
        previous_output=None,
    )


def items_of(step: StepSpec, scope: Scope) -> list[str]:
    """The items of a forEach loop: its input as a list, a JSON list in a
    string, or comma-separated values (blank ones dropped)."""
    assert step.loop is not None and step.loop.for_each is not None
    if isinstance(step.loop.for_each, list):
        return [_text(item) for item in step.loop.for_each]
    name = step.loop.for_each
    value = scope.values.get(name)
    if value is None:
        items: list[Any] = []
    elif isinstance(value, list | tuple):
        items = list(value)
    elif isinstance(value, str) and value.strip().startswith("["):
        try:
            items = bounded_json.loads(value, what=f"forEach input {name!r}")
        except json.JSONDecodeError as exc:
            raise ExpansionError(f"forEach input {name!r} is not a valid JSON list: {exc.msg}") from None
        except ValueError as exc:
            raise ExpansionError(str(exc)) from None
        if not isinstance(items, list):
            raise ExpansionError(f"forEach input {name!r} is not a list")
    else:
        items = [part.strip() for part in str(value).split(",") if part.strip()]
    if len(items) > MAX_FOR_EACH_ITEMS:
        raise ExpansionError(f"forEach input {name!r} has {len(items)} items; at most {MAX_FOR_EACH_ITEMS}")
    return [_text(item) for item in items]


def _in_dependency_order(steps: Sequence[StepSpec]) -> list[StepSpec]:
    order: list[StepSpec] = []
    done: set[str] = set()
    remaining = list(steps)
    while remaining:
        step = next((s for s in remaining if all(d in done for d in s.depends_on)), None)
        if step is None:
            raise ValueError("the steps form a dependency cycle")
        remaining.remove(step)
        order.append(step)
        done.add(step.id)
    return order


def _dedupe(values: Any) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def clip(text: str) -> str:
    if len(text) <= MAX_PREVIOUS_OUTPUT:
        return text
    return text[:MAX_PREVIOUS_OUTPUT] + TRUNCATED


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def step_conditions(spec: WorkflowSpec) -> dict[tuple[str, ...], str]:
    """The ``condition`` of each step and each loop that has one (not an
    include's: agents.spec.not_run), by its path of step ids (``("deploy",
    "ship")`` for ``deploy[3].ship``, ``("cycle", "fix")`` for ``cycle.2.fix``,
    ``("cycle",)`` for the loop ``cycle``)."""
    found: dict[tuple[str, ...], str] = {}

    def walk(steps: Sequence[StepSpec], path: tuple[str, ...]) -> None:
        for step in steps:
            if step.loop is not None:
                if step.condition is not None:
                    found[(*path, step.id)] = step.condition
                walk(step.loop.steps, (*path, step.id))
            elif step.included is not None:
                walk(step.included.steps, (*path, step.id))
            elif step.loop is None and step.include is None and step.condition is not None:
                found[(*path, step.id)] = step.condition

    walk(spec.steps, ())
    return found


def condition_path(runtime_id: str) -> tuple[str, ...]:
    """The path of step ids ``step_conditions`` keys a runtime step by."""
    return tuple(part.id for part in ids.parse(runtime_id))


def step_retries(spec: WorkflowSpec) -> dict[tuple[str, ...], int]:
    """The ``retries`` of each step that has some and runs as a step (not a
    container), by its path of step ids (``condition_path``)."""
    found: dict[tuple[str, ...], int] = {}

    def walk(steps: Sequence[StepSpec], path: tuple[str, ...]) -> None:
        for step in steps:
            if step.loop is not None:
                walk(step.loop.steps, (*path, step.id))
            elif step.included is not None:
                walk(step.included.steps, (*path, step.id))
            elif step.include is None and step.retries:
                found[(*path, step.id)] = step.retries

    walk(spec.steps, ())
    return found
