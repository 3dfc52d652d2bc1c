"""Token budgets (the handler contract's and the coordinator/worker
pattern's), counted by a local OpenAI-compatible endpoint
(bench/counting_endpoint.py) that zenweb's openai provider talks to.

- The handler: the prompt tokens of one command with a catalog of 50
  workflows (each with a description, triggers and inputs). Target
  <= 2,500.
- The coordinator's share: every token (prompt and completion) of
  ``research_brief``'s coordinator over every token of its run, with
  workers that each answer about 800 tokens. Target <= 15%.

Counts are deterministic: each is measured once, in a child process on
the bench's SQLite database, the run's Celery tasks run in that process
one after another (as ``bench.turns`` runs them).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

from bench.common import Context, Result, Target, run_child, skipped

WORKFLOWS = 50
WORKER_TOKENS = 800
MODEL = "gpt-4o-mini"
HANDLER_TARGET = Target("<=", 2500, "<= 2,500 tokens")
SHARE_TARGET = Target("<=", 15, "<= 15%")
AREAS = ("inventory", "payroll", "support", "marketing", "security", "billing", "hiring", "travel", "legal", "fleet")
ACTIONS = ("report", "audit", "forecast", "cleanup", "digest")


def measure(ctx: Context) -> list[Result]:
    env = ctx.sqlite().env
    handler = run_child("bench.token_budgets", "handler_prompt", env, workflows=WORKFLOWS)
    share = run_child("bench.token_budgets", "coordinator_share", env, worker_tokens=WORKER_TOKENS)
    handler_note = f"{WORKFLOWS} workflows; the catalog {'compacted' if handler['compacted'] else 'sent whole'}"
    share_note = (
        f"coordinator {share['coordinator']:,} of {share['total']:,} tokens in {share['requests']} requests "
        f"(workers answer ~{WORKER_TOKENS} tokens each)"
    )
    share_row = Result(
        "token_budgets",
        "coordinator share of research_brief",
        "openai (local)",
        "%",
        [round(100 * share["coordinator"] / share["total"], 1)],
        higher_is_better=False,
        target=SHARE_TARGET,
        note=share_note,
    )
    if share["status"] != "completed":  # the share of a run that stopped early says nothing
        why = f"the run ended {share['status']}: {share['error']}"
        share_row = skipped("token_budgets", share_row.name, share_row.backend, "%", why, target=SHARE_TARGET)
    return [
        Result(
            "token_budgets",
            "handler prompt, one command",
            "openai (local)",
            "tokens",
            [handler["prompt_tokens"]],
            higher_is_better=False,
            target=HANDLER_TARGET,
            note=handler_note,
        ),
        share_row,
    ]


# In a child process with Django ----------------------------------------------


def handler_prompt(workflows: int) -> dict[str, Any]:
    """Register ``workflows`` catalog workflows and answer one command
    through the endpoint: the prompt tokens it counted."""
    from django.contrib.auth import get_user_model

    from bench.counting_endpoint import CountingEndpoint
    from runs.actions import do_register_workflow
    from runs.actions.commands import do_command

    names = [f"{area}_{action}" for area in AREAS for action in ACTIONS][:workflows]
    for name in names:
        do_register_workflow(catalog_workflow(name), f"bench/{name}.yaml")
    user = get_user_model().objects.create_user("bench-tokens")

    def select(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        selection = {
            "_type": "COORDINATOR_SELECTION",
            "command_received": "Run the payroll audit for the Lyon office",
            "workflow_selected": "payroll_audit",
            "workflow_args": {},
            "status": "needs_more_info",
            "missing": ["period"],
            "selection_reason": "trigger matched: payroll audit",
        }
        return "handler", {"content": json.dumps(selection)}

    with CountingEndpoint(select) as endpoint, _environ(endpoint.env(MODEL)):
        command = do_command("Run the payroll audit for the Lyon office", user=user)
    [usage] = endpoint.usages
    return {"prompt_tokens": usage.prompt_tokens, "compacted": command.compact_catalog, "status": command.status}


def catalog_workflow(name: str) -> str:
    """A catalog workflow as people write them: a description, triggers, two inputs."""
    area, action = name.split("_")
    return f"""\
name: {name}
description: Prepare the {area} {action} for a team or a site, with the figures, the open issues and what to do next.
triggers: ["{area} {action}", "{action} {area}", "{area}"]
inputs:
  site: {{type: string, required: true, description: "The office, warehouse or team it covers."}}
  period: {{type: string, required: true, description: "The month or quarter, e.g. 2025-Q1."}}
agents:
  analyst: {{description: {area} analyst, script: [{{say: done}}]}}
steps:
  - {{id: {action}, agent: analyst, instructions: "Prepare the {area} {action} for $site over $period."}}
"""


def coordinator_share(worker_tokens: int) -> dict[str, Any]:
    """Run research_brief on the openai provider against the endpoint, its
    agents answering as a coordinator and its workers would: the tokens of
    the coordinator's requests and of all of them."""
    from bench.counting_endpoint import CountingEndpoint
    from runs.models import Run

    answer = _ResearchBrief(worker_tokens)
    with CountingEndpoint(answer) as endpoint, _environ(endpoint.env(MODEL)):
        run_id = _run_inline(_openai_research_brief())
    by_label: collections.Counter[str] = collections.Counter()
    for usage in endpoint.usages:
        by_label[usage.label] += usage.prompt_tokens + usage.completion_tokens
    status, error = Run.objects.values_list("status", "error").get(pk=run_id)
    return {
        "error": error[:300],
        "coordinator": by_label["coordinator"],
        "total": sum(by_label.values()),
        "requests": len(endpoint.usages),
        "status": status,
    }


def _openai_research_brief() -> str:
    """The catalog's research_brief with every agent on the openai provider."""
    import yaml
    from django.conf import settings

    spec = yaml.safe_load((settings.BASE_DIR / "runs" / "catalog" / "research_brief.yaml").read_text())
    for agent in spec["agents"].values():
        agent.pop("script", None)
        agent["provider"] = "openai"
    return yaml.safe_dump(spec, sort_keys=False)


def _run_inline(yaml_text: str) -> int:
    """Start a run of ``yaml_text`` and run its Celery tasks here, in order."""
    from celery.app.task import Task

    from runs.actions import do_create_run, do_register_workflow

    workflow, _ = do_register_workflow(yaml_text, "bench/token_budgets.py")
    queue: collections.deque[tuple[Any, Any, Any]] = collections.deque()

    def enqueue(task: Any, args: Any = None, kwargs: Any = None, *_positional: Any, **_options: Any) -> None:
        queue.append((task, args or (), kwargs or {}))

    queued = Task.apply_async
    Task.apply_async = enqueue  # this process runs every task, in order
    try:
        run = do_create_run(workflow, {})
        while queue:
            task, args, kwargs = queue.popleft()
            task.run(*args, **kwargs)
    finally:
        Task.apply_async = queued
    return run.pk


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """``values`` in os.environ (where the openai provider reads its
    settings) while the block runs."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _ResearchBrief:
    """research_brief's agents as a model would answer them: the
    coordinator plans three workers and finalizes once they are done; each
    worker answers about ``worker_tokens`` tokens of findings."""

    def __init__(self, worker_tokens: int) -> None:
        self.worker_tokens = worker_tokens

    def __call__(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        tools = {tool["function"]["name"] for tool in body.get("tools") or []}
        messages = body.get("messages") or []
        if "spawn_worker" not in tools:
            return "worker", self._worker(tools, messages)
        planned = any(
            call["function"]["name"] == "spawn_worker"
            for message in messages
            for call in message.get("tool_calls") or []
        )
        if not planned:
            return "coordinator", _calls(*_PLAN)
        if messages[-1].get("role") == "tool":
            return "coordinator", {"content": "Three workers planned: search and prices in parallel, then the brief."}
        last = str(messages[-1].get("content") or "")
        if "pending" in last or "running" in last:
            return "coordinator", {"content": "Waiting for the workers."}
        summary = "Brief written: the best laptops under $1000 with their sources, the Aster Swift 14's price trend."
        return "coordinator", _calls(("finalize", {"summary": summary}))

    def _worker(self, tools: set[str], messages: list[dict[str, Any]]) -> dict[str, Any]:
        """A worker's turn: the tool calls the catalog's script makes for
        its agent, one a turn, then its findings."""
        done = sum(1 for message in messages if message.get("role") == "tool")
        script = next((calls for tool, calls in _WORKER_CALLS.items() if tool in tools), ())
        if done < len(script):
            return _calls(script[done])
        return {"content": self._findings()}

    def _findings(self) -> str:
        from agents.llm import tokens

        line = (
            "The Aster Swift 14 (16 GB, 512 GB) lists at $849 at shop.example.net, down from $949 in October; "
            "reviewers praise its battery and keyboard and fault its glossy screen.\n"
        )
        text = ""
        while tokens.count_text(text + line, MODEL) <= self.worker_tokens:
            text += line
        return text


_PLAN = (
    (
        "spawn_worker",
        {
            "task": "Search the sources for laptops under $1000 and list the best matches with their sources.",
            "agent": "researcher",
            "tools": ["search"],
            "writes": ["findings"],
        },
    ),
    (
        "spawn_worker",
        {
            "task": "Chart the price history of the Aster Swift 14.",
            "agent": "analyst",
            "tools": ["price_history"],
            "writes": ["prices"],
        },
    ),
    (
        "spawn_worker",
        {
            "task": "Write brief.md from the findings and the prices.",
            "agent": "writer",
            "tools": ["write_file", "read_file"],
            "depends_on": ["worker-1", "worker-2"],
            "writes": ["brief.md"],
        },
    ),
)


# What research_brief's workers call (its script's calls), by a tool each has.
_WORKER_CALLS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "search": (
        ("search", {"query": "laptops under $1000", "limit": 5}),
        ("search", {"query": "laptops under $1000", "limit": 5, "cursor": "5"}),
    ),
    "price_history": (("price_history", {"document_id": "shop-aster-swift-14"}),),
    "write_file": (
        ("write_file", {"path": "brief.md", "content": "# Brief: laptops under $1000\n\nSee the findings.\n"}),
        ("read_file", {"path": "brief.md"}),
    ),
}
_CALL_IDS = itertools.count(1)


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "content": "",
        "tool_calls": [
            {
                "id": f"call-{next(_CALL_IDS)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in calls
        ],
    }
