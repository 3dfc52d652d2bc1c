"""Tools as a run sees them: the registry of a workflow's agents (builtins,
the MCP tools of its servers, catalog workflows offered as tools and
approved created tools). What a turn's tools get to work with (the
environment, the run store behind them): runs/actions/tool_host.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from agents.spec import WorkflowSpec
from agents.tools import Tool, ToolRegistry
from agents.tools.mcp import McpServerConfig
from agents.tools.mcp import servers as mcp_servers
from agents.tools.workflows import workflow_tool
from runs.actions import extensions
from runs.actions.catalog import REGISTRY, workflow_spec
from runs.models import Step, Workflow


def tools_for(spec: WorkflowSpec, role: str, requested: Iterable[str]) -> tuple[ToolRegistry, list[Tool]]:
    """The registry to call through and the tools an agent of ``role`` gets:
    builtins, plus the MCP tools, catalog workflows offered as tools and
    approved created tools (runs/actions/extensions.py) that it asks for."""
    requested = list(requested)
    registry = ToolRegistry(
        REGISTRY.tools(),
        max_result_chars=settings.ZENWEB_MAX_TOOL_RESULT_CHARS,
        secrets=settings.ZENWEB_SECRET_VALUES,
    )
    wanted = [name for name in requested if registry.get(name) is None]
    if not wanted:  # builtins only: no MCP server, catalog or created tool to look up
        return registry, registry.for_role(role, requested)  # type: ignore[arg-type]
    for tool in mcp_servers.tools_for_names(mcp_servers_of(spec), wanted):
        registry.add(tool)
    for name in wanted:
        if registry.get(name) is None:
            offered = _workflow_tool(name) or extensions.created_tool_named(name)
            if offered is not None:
                registry.add(offered)
    return registry, registry.for_role(role, requested)  # type: ignore[arg-type]


def mcp_servers_of(spec: WorkflowSpec) -> dict[str, McpServerConfig]:
    """The MCP servers a workflow's agents may use: the operator's
    (ZENWEB_MCP_SERVERS) that the workflow names in ``mcp:``, and no others
    (a coordinator granting a worker tools cannot reach past them)."""
    return {name: config for name, config in settings.ZENWEB_MCP_SERVERS.items() if name in spec.mcp}


def mcp_server_statuses() -> list[dict[str, Any]]:
    """Every configured MCP server with its status (started if it was not)
    and the latest workflow versions that name it: for the catalog page,
    which shows names, never command lines or URLs."""
    users: dict[str, list[str]] = {}
    for workflow in _latest_workflows():
        for name in workflow_spec(workflow).mcp:
            users.setdefault(name, []).append(workflow.name)
    statuses = []
    for config in settings.ZENWEB_MCP_SERVERS.values():
        server = mcp_servers.POOL.server(config)
        try:
            server.tools()
        except mcp_servers.McpUnavailable:
            pass  # the status says why
        data = {key: value for key, value in server.status_data().items() if key != "target"}
        statuses.append({**data, "declared_by": users.get(config.name, [])})
    return sorted(statuses, key=lambda s: s["name"])


def _latest_workflows() -> list[Workflow]:
    latest: dict[str, Workflow] = {}
    for workflow in Workflow.objects.order_by("name", "-version"):
        latest.setdefault(workflow.name, workflow)
    return list(latest.values())


def catalog_registry() -> ToolRegistry:
    """Every tool an agent could be given: builtins and every catalog
    workflow offered as a tool (its latest version)."""
    registry = ToolRegistry(REGISTRY.tools())
    for name in sorted(set(Workflow.objects.exclude(tool_name="").values_list("tool_name", flat=True))):
        tool = _workflow_tool(name)
        if tool is not None and registry.get(name) is None:
            registry.add(tool)
    for name in extensions.approved_tool_names():
        created = extensions.created_tool_named(name)
        if created is not None and registry.get(name) is None:
            registry.add(created)
    # The tools of every configured MCP server that is up (mcp.<server>.<tool>).
    for config in settings.ZENWEB_MCP_SERVERS.values():
        try:
            tools = mcp_servers.POOL.server(config).tools()
        except mcp_servers.McpUnavailable:
            continue  # listed with why on the catalog page (mcp_server_statuses)
        for tool in tools:
            if registry.get(tool.name) is None:
                registry.add(tool)
    return registry


def _workflow_tool(name: str) -> Tool | None:
    workflow = Workflow.objects.filter(tool_name=name).order_by("-created", "-version").first()
    return workflow_tool(workflow_spec(workflow)) if workflow else None


def step_tools(spec: WorkflowSpec, step: Step) -> tuple[ToolRegistry, list[Tool]]:
    """The registry and tools of a step: its agent's tools and the step's own."""
    agent = spec.agents[step.agent]
    return tools_for(spec, "step", [*agent.tool_names, *step.tools])
