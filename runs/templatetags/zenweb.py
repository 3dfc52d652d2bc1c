"""Template helpers for the dashboard. Everything returned here is plain text
the template escapes (the event rows, which escape every value themselves,
are in ``event_rows.py``), so agent and model text can never become markup."""

from __future__ import annotations

import json

from django import template
from django.conf import settings
from django.utils import timezone

from agents import workspace_quota
from agents.tools.mcp.config import server_of
from runs.actions.catalog import workflow_spec
from runs.actions.tooling import mcp_servers_of
from runs.models import Step
from runs.templatetags.event_summary import event_summary

register = template.Library()

# The event stream's one-line summaries (runs/templatetags/event_summary.py).
register.filter("event_summary", event_summary)


@register.filter
def pairs(mapping) -> list[tuple]:
    """A dict's (key, value) pairs. ``{% for k, v in d.items %}`` looks up a
    key named "items" first: a run with an input called items broke its page."""
    return list(mapping.items()) if mapping else []


# No indent: with one, the json module encodes in pure Python (0.16 ms an
# event here), and a run page and every live update show hundreds.
_ONE_LINE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


@register.filter
def pretty_json(value) -> str:
    """JSON for people: an object's keys one per line, in order, each value
    on its line (nested values stay on it, compact)."""
    if isinstance(value, dict) and value:
        items = sorted(value.items(), key=lambda item: str(item[0]))
        lines = (f"  {_ONE_LINE.encode(str(key))}: {_ONE_LINE.encode(item)}" for key, item in items)
        return "{\n" + ",\n".join(lines) + "\n}"
    return _ONE_LINE.encode(value)


@register.filter
def duration(run) -> str:
    """How long a run took, or has been running: "4.2 s", "3 min 5 s"."""
    if not run.started:
        return ""
    seconds = ((run.finished or timezone.now()) - run.started).total_seconds()
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def inputs_hint(workflow) -> str:
    """What to type in the start form's inputs for ``workflow``: one
    ``name=...`` line per declared input, with its default or what it is."""
    lines = []
    for name, declared in workflow_spec(workflow).inputs.items():
        if declared.default is not None:
            value = json.dumps(declared.default) if not isinstance(declared.default, str) else declared.default
        else:
            value = f"<{declared.description or declared.type}>"
        lines.append(f"{name}={value}{' (required)' if declared.required else ''}")
    return "\n".join(lines) or "this workflow takes no inputs"


@register.inclusion_tag("runs/partials/step_progress.html")
def step_progress(run, total: int, ended) -> dict:
    """A run's step progress, for its header and its row in the runs list.
    ``ended`` holds (status, how many steps ended with it) pairs. Only
    completed steps are done: a run whose 71 steps were all cancelled reads
    "0/71 steps completed, 71 cancelled", its bar empty, not full."""
    done = Step.Status.COMPLETED
    return {
        "run": run,
        "total": total,
        "completed": dict(ended).get(done, 0),
        "otherwise": [(status, n) for status, n in ended if status != done],
    }


@register.filter
def checked_disk_quota(workflow) -> str:
    """Why the disk quota of ``workflow``'s workspace is only checked on this
    server, not enforced by a file system of its own, if its tools write
    there (run_shell, write_file, edit_file); else ""."""
    spec = workflow_spec(workflow)
    names = {name for agent in spec.agents.values() for name in agent.tools}
    names |= {name for step in spec.steps for name in getattr(step, "tools", [])}
    if not names & {"run_shell", "write_file", "edit_file"}:
        return ""
    return workspace_quota.checked_only(settings.ZENWEB_SANDBOX.workspace_fs)


@register.filter
def unsandboxed_tools(workflow) -> str:
    """What of ``workflow`` runs without a sandbox because the operator
    turned it off (ZENWEB_SANDBOX=off): ``run_shell``, stdio MCP servers; or ""."""
    if settings.ZENWEB_SANDBOX.enabled:
        return ""
    return _process_tools(workflow)


@register.filter
def per_process_limits(workflow) -> str:
    """Why this host limits ``workflow``'s run_shell and stdio MCP servers
    per process only, not for a whole call (no cgroups it can use), or ""."""
    report = settings.ZENWEB_SANDBOX.whole_call()
    if report.complete or not _process_tools(workflow):
        return ""
    return report.describe()


def _process_tools(workflow) -> str:
    """What of ``workflow`` runs as processes of the host: ``run_shell``, stdio MCP servers; or ""."""
    spec = workflow_spec(workflow)
    names = {name for agent in spec.agents.values() for name in agent.tools}
    names |= {name for step in spec.steps for name in getattr(step, "tools", [])}
    servers = mcp_servers_of(spec)
    stdio = sorted({s for s in map(server_of, names) if s in servers and servers[s].transport == "stdio"})
    found = (["run_shell"] if "run_shell" in names else []) + [f"MCP server {name}" for name in stdio]
    return ", ".join(found)
