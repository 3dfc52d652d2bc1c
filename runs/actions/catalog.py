"""The workflow catalog: registering versions, parsing stored specs, run inputs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

import yaml
from django.conf import settings
from django.db import DatabaseError, transaction

from agents import expansion
from agents.inputs import workspace_path
from agents.spec import (
    InputSpec,
    SpecProblem,
    WorkflowSpec,
    WorkflowValidationError,
    not_run_refusal,
    parse_workflow,
)
from agents.spec.yaml_locations import line_for, parse_with_locations
from agents.tools import Role, default_registry
from agents.tools.builtin.created import CREATED_TOOL_ROLES
from agents.tools.mcp import servers as mcp_servers
from agents.tools.workflows import WORKFLOW_TOOL_ROLES
from runs.models import CreatedTool, Run, Workflow
from runs.store.sql import store

# The built-in tools: what a workflow may name, and what its steps call.
REGISTRY = default_registry()

# The most characters one run input may hold (a command is capped at 4,000).
MAX_INPUT_CHARS = 10_000


class InputError(ValueError):
    """Run inputs that do not match the workflow's declared inputs."""


def known_tool_roles(extra: Iterable[str] = ()) -> dict[str, frozenset[Role]]:
    """Every tool name an agent may list, with the roles that may call it:
    builtins, catalog workflows offered as tools, ``extra`` (tools offered by
    files being loaded together), the tools of ZENWEB_MCP_SERVERS and the
    approved tools coordinators created. Where names clash, the one a run
    would get wins (builtin, then MCP, then workflow, then created)."""
    try:
        offered = list(Workflow.objects.exclude(tool_name="").values_list("tool_name", flat=True))
        created = list(CreatedTool.objects.filter(status=CreatedTool.Status.APPROVED).values_list("name", flat=True))
    except DatabaseError:
        # validate_workflow works before the database is set up; the files
        # checked together still see each other's tools through ``extra``.
        offered, created = [], []
    return {
        # Tools coordinators created, once approved (runs/actions/extensions.py).
        **{name: CREATED_TOOL_ROLES for name in created},
        **{name: WORKFLOW_TOOL_ROLES for name in [*offered, *extra]},
        **_mcp_tool_roles(),
        **{tool.name: tool.roles for tool in REGISTRY.tools()},
    }


def _mcp_tool_roles() -> dict[str, frozenset[Role]]:
    """The tools of the ZENWEB_MCP_SERVERS servers; ``<server>__*`` for one
    that cannot be listed now (its tool names, and who may call them, are
    then checked when called)."""
    roles: dict[str, frozenset[Role]] = {}
    for config in settings.ZENWEB_MCP_SERVERS.values():
        try:
            roles.update({tool.name: tool.roles for tool in mcp_servers.POOL.server(config).tools()})
        except mcp_servers.McpUnavailable:
            roles[f"{config.name}__*"] = frozenset({"coordinator", "step"})
    return roles


def do_register_workflow(
    yaml_text: str,
    source: str = "<string>",
    *,
    also_offered: Iterable[str] = (),
    from_file: bool = True,
    ad_hoc: bool = False,
    by_run: Run | None = None,
) -> tuple[Workflow, bool]:
    """Validate a workflow and store it as the next version of its name.

    Registering text identical to the latest version changes nothing.
    Raises agents.spec.WorkflowValidationError with every problem found.
    ``also_offered`` names workflow tools registered in the same batch.
    ``from_file=False``: the text came over the API or a form, and
    ``source`` is only its name (includes cannot reach the server's files).
    ``ad_hoc`` (run_workflow FILE): stored for one run, never offered, and
    no name's latest version (offers.py); text equal to the latest offered
    or ad-hoc version reuses it. ``by_run``: a run's coordinator registers
    it (create_workflow), stored with the person who started that run.
    """
    spec = parse_workflow(yaml_text, source, known_tools=known_tool_roles(also_offered), from_file=from_file)
    with transaction.atomic():
        versions = Workflow.objects.filter(name=spec.name).order_by("-version")
        newest = versions.first()
        latest = newest if ad_hoc else versions.exclude(offer=Workflow.Offer.AD_HOC).first()
        if latest and latest.yaml_text == yaml_text:
            return latest, False
        if spec.tool is not None:
            problem = _offer_problem(spec.name, spec.tool.name)
            if problem:
                raise WorkflowValidationError([SpecProblem(source, _tool_name_line(yaml_text), "tool.name", problem)])
        version = max(spec.version, newest.version + 1 if newest else 1)
        workflow = store().create_workflow(
            {
                "offer": Workflow.Offer.AD_HOC if ad_hoc else Workflow.Offer.LATEST,
                "name": spec.name,
                "version": version,
                "description": spec.description,
                "source": source,
                "yaml_text": yaml_text,
                "spec": spec.to_data(),
                # An ad-hoc version is offered to no one, agents included.
                "tool_name": spec.tool.name if spec.tool and not ad_hoc else "",
                **({"created_by_run": by_run, "created_by": by_run.created_by} if by_run else {}),
            }
        )
    return workflow, True


def do_load_catalog(directory: Path) -> list[tuple[Workflow, bool]]:
    """Register every ``*.yaml`` in ``directory`` (sorted, for stable versions).
    A workflow may use a tool another file in the batch offers."""
    paths = sorted(directory.glob("*.yaml"))
    offered = [name for path in paths if (name := offered_tool_name(path.read_text()))]
    _check_offered_once(paths)
    return [do_register_workflow(path.read_text(), str(path), also_offered=offered) for path in paths]


def _offer_problem(workflow: str, tool: str) -> str | None:
    """Why ``workflow`` cannot offer itself as tool ``tool``, or None: an
    agent listing the name gets the builtin or MCP tool of that name
    (tooling.catalog_registry), and of two workflows only one."""
    if REGISTRY.get(tool) is not None:
        return f"{tool!r} is the name of a builtin tool: agents listing it would never get this workflow"
    if tool in _mcp_tool_roles():
        return f"{tool!r} is the name of an MCP server's tool: agents listing it would never get this workflow"
    if CreatedTool.objects.filter(CreatedTool.HOLDS_NAME, name=tool).exists():
        return f"{tool!r} is the name of a tool a coordinator created: choose another name"
    for other in (
        Workflow.objects.filter(tool_name=tool).exclude(name=workflow).values_list("name", flat=True).distinct()
    ):
        latest = Workflow.objects.filter(name=other).order_by("-version").first()
        if latest is not None and latest.tool_name == tool:
            return f"{tool!r} is already offered by workflow {other!r} ({latest.source}): choose another name"
    return None


def _check_offered_once(paths: list[Path]) -> None:
    """Raise if two files of one catalog offer the same tool name, naming both."""
    by_tool: dict[str, list[Path]] = {}
    for path in paths:
        if name := offered_tool_name(path.read_text()):
            by_tool.setdefault(name, []).append(path)
    problems = [
        SpecProblem(
            str(path),
            _tool_name_line(path.read_text()),
            "tool.name",
            f"{tool!r} is offered by more than one workflow: {', '.join(str(p) for p in clashing)}",
        )
        for tool, clashing in by_tool.items()
        if len(clashing) > 1
        for path in clashing
    ]
    if problems:
        raise WorkflowValidationError(problems)


def _tool_name_line(yaml_text: str) -> int | None:
    try:
        return line_for(parse_with_locations(yaml_text)[1], ("tool", "name"))
    except yaml.YAMLError:
        return None


def offered_tool_name(yaml_text: str) -> str | None:
    """The tool name a workflow file offers itself under, read without validating."""
    try:
        data = yaml.safe_load(yaml_text)
    except yaml.YAMLError:
        return None
    tool = data.get("tool") if isinstance(data, dict) else None
    name = tool.get("name") if isinstance(tool, dict) else None
    return name if isinstance(name, str) else None


_SPECS: dict[tuple[int, object], WorkflowSpec] = {}


def workflow_spec(workflow: Workflow) -> WorkflowSpec:
    """The parsed spec of a stored version. Versions never change, so parsed
    specs are kept (keyed with the creation time too: a test database that
    is flushed hands out the same primary keys again)."""
    key = (workflow.pk, workflow.created)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = WorkflowSpec.model_validate(workflow.spec)
    return spec


def not_run_yet(workflow: Workflow) -> str | None:
    """Why no run of ``workflow`` may start: it uses what zenweb accepts of
    zenflow's language but does not run yet (each field with its step and
    line, agents.spec.not_run). None: nothing such."""
    return not_run_refusal(workflow_spec(workflow), workflow.yaml_text, workflow.source or workflow.name)


def spec_of(workflow_id: int, created: datetime) -> WorkflowSpec:
    """workflow_spec of the version with this key, for a caller that read
    only the key: the row is loaded only when its spec is not kept yet."""
    spec = _SPECS.get((workflow_id, created))
    if spec is None:
        spec = workflow_spec(Workflow.objects.get(pk=workflow_id))
    return spec


def check_inputs(spec: WorkflowSpec, raw: Mapping[str, object]) -> dict[str, object]:
    """Turn raw inputs (strings from a CLI or form, or JSON values) into the
    workflow's declared inputs, with defaults. Every problem is reported."""
    problems: list[str] = []
    values: dict[str, object] = {}
    for name in raw:
        if name not in spec.inputs:
            known = ", ".join(sorted(spec.inputs)) or "none"
            problems.append(f"unknown input {name!r} (this workflow takes: {known})")
    for name, declared in spec.inputs.items():
        if name in raw:
            try:
                values[name] = _input_value(name, declared, raw[name])
            except ValueError as exc:
                problems.append(str(exc))
        elif declared.required:
            problems.append(f"missing required input {name!r}")
        elif declared.default is not None:
            values[name] = declared.default
    if problems:
        raise InputError("; ".join(problems))
    try:
        expansion.expand(spec, values)
    except expansion.ExpansionError as exc:
        raise InputError(str(exc)) from None
    return values


def _input_value(name: str, declared: InputSpec, value: object) -> object:
    """``value``, given for input ``name``, as its ``declared`` type; a
    ValueError says what is wrong with it."""
    size = len(str(value))
    if size > MAX_INPUT_CHARS:
        # Inputs go into every step's prompt: a 60 KB one cost 94,000 tokens a turn.
        raise ValueError(f"input {name!r} is {size:,} characters; at most {MAX_INPUT_CHARS:,}")
    if declared.type == "path":
        try:
            return workspace_path(value)
        except ValueError as exc:
            raise ValueError(f"input {name!r} must be a path inside the run's workspace: {exc}") from None
    try:
        return _coerce(value, declared.type)
    except ValueError:
        raise ValueError(f"input {name!r} must be {declared.type}, got {value!r}") from None


def _coerce(value: object, type_: str) -> object:
    if type_ == "string":
        return str(value)
    if type_ == "integer":
        if isinstance(value, bool):
            raise ValueError
        return int(str(value))
    if type_ == "number":
        if isinstance(value, bool):
            raise ValueError
        return float(str(value))
    if isinstance(value, bool):
        return value
    lowered = str(value).strip().lower()
    if lowered in {"true", "yes", "1"}:
        return True
    if lowered in {"false", "no", "0"}:
        return False
    raise ValueError
