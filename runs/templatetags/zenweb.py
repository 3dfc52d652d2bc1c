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

register = template.Library()

SUMMARY_CHARS = 240


def _short(text: object) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


@register.filter
def event_summary(event) -> str:
    """One line saying what an event means, for the event stream."""
    data = event.data or {}
    match event.type:
        case "message_sent":
            return _short(f"{data.get('from')} → {data.get('to')} ({data.get('msg_type')}): {data.get('content', '')}")
        case "message_dropped":
            return _short(f"{data.get('from')} → {data.get('to')} dropped: {data.get('reason')}")
        case "coordinator_inbox_message":
            return _short(f"from {data.get('from')}: {data.get('content', '')}")
        case "agent_inbox_drain":
            return _short(f"{data.get('message_id')} from {data.get('from')}")
        case "coordinator_message":
            return _short(f"→ {data.get('to')}: {data.get('text', '')}")
        case "coordinator_narration":
            return _short(data.get("text", ""))
        case "coordinator_synthesis":
            return _short(data.get("summary", ""))
        case "tool_call":
            if data.get("phase") == "start":
                return _short(f"{data.get('name')}({data.get('arguments', '')})")
            return _short(f"{data.get('name')} → {data.get('result', '')}")
        case "agent_turn":
            calls = ", ".join(data.get("tool_calls") or [])
            return _short(f"turn {data.get('turn')}: " + (f"calls {calls}" if calls else data.get("content", "")))
        case "step_end":
            return _short(data.get("output", ""))
        case "error":
            return _short(data.get("error", ""))
        case "step_skipped":
            return _short(f"{data.get('status', 'skipped')}: {data.get('reason', '')}")
        case "workflow_start":
            return _short(f"{data.get('workflow')} v{data.get('version')}")
        case "workflow_end":
            return _short(data.get("status", ""))
        case "agent_wake":
            return _short(f"cycle {data.get('cycle')}: {data.get('reason')}")
        case "max_wake_cycles_warning":
            return _short(f"wake cycle {data.get('cycle')} of at most {data.get('max')}")
        case "step_cancelled":
            return _short(f"cancelled by {data.get('message_id')}: {data.get('reason', '')}")
        case "resume_started":
            return _short(f"resume {data.get('resume')} for {data.get('message_id')}")
        case "resume_completed":
            return _short(data.get("reply", ""))
        case "resume_failed":
            return _short(data.get("error", ""))
        case "loop_iteration":
            return _short(f"iteration {data.get('iteration')}: {', '.join(data.get('steps') or [])}")
        case "loop_judge":
            return _short(f"asking {data.get('agent')} about iteration {data.get('iteration')}")
        case "loop_judged":
            verdict = "done" if data.get("done") else "not done"
            return _short(f"iteration {data.get('iteration')} {verdict}: {data.get('answer', '')}")
        case "loop_end":
            return _short(f"{data.get('status')}: {data.get('reason', '')}")
        case "provider_retry":
            status = data.get("status")
            what = f"HTTP {status}" if status is not None else "no answer"
            return _short(
                f"{what}, attempt {data.get('attempt')}, retrying in {data.get('wait')}s: {data.get('message', '')}"
            )
        case "catalog_compacted":
            return _short(
                f"catalog sent compact: {data.get('full_tokens')} tokens in full, {data.get('compact_tokens')}"
                f" compact, budget {data.get('budget_tokens')}"
            )
        case "tool_started":
            return _short(f"{data.get('name')} attempt {data.get('attempt')} on {data.get('worker')}")
        case "tool_result":
            outcome = "ok" if data.get("ok") else data.get("error_kind") or data.get("status")
            return _short(f"{data.get('name')}: {outcome} in {data.get('duration_ms')} ms")
        case "claim_recorded":
            return _short(f"{data.get('claim')} ({data.get('url') or 'no url'})")
        case "approval_requested":
            return _short(f"{data.get('what')}: {data.get('why')}")
        case "approval_decided":
            return _short(f"{data.get('decision')} by {data.get('by')}: {data.get('reason', '')}")
        case "approval_lapsed" | "run_stuck" | "run_resumed":
            return _short(data.get("reason", ""))
        case "lease_expired":
            what = data.get("name") or f"turn {data.get('turn')}"
            return _short(f"{what}: the lease of {data.get('owner')} ran out")
        case "coordinator_over_budget":
            sent = f", sent {data.get('compact_tokens')} compact" if data.get("compacted") else ""
            return _short(
                f"{data.get('reason')} prompt {data.get('prompt_tokens')} tokens,"
                f" budget {data.get('budget_tokens')}{sent}"
            )
    return ""


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
