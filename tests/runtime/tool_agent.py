"""An agent of a run that calls the builtin tools through the registry, with
the run's workspace injected, and readers of what a call returns."""

from __future__ import annotations

import json
from pathlib import Path

from agents.events import ListSink
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.tools import ToolCallMeta, ToolContext, default_registry


class Agent:
    """One agent of a run, with the run's workspace injected."""

    def __init__(self, workspace: Path, role: str = "step", *, destructive_approved: bool = False) -> None:
        self.registry = default_registry()
        sink = ListSink()
        router = MessageRouter(InMemoryMailboxStore(), sink)
        step_id = COORDINATOR if role == "coordinator" else "build"
        meta = ToolCallMeta("run-1", f"run-1/{step_id}", f"{step_id}/1", "call-1")
        self.ctx = ToolContext(
            meta,
            step_id,
            role,
            router,
            sink,
            injected={"workspace": str(workspace)},
            destructive_approved=destructive_approved,
        )

    def call(self, name: str, arguments: dict):
        allowed = self.registry.for_role(self.ctx.role, [name])
        return self.registry.call(self.ctx, name, json.dumps(arguments), allowed)


def result_of(outcome) -> dict:
    assert outcome.ok, outcome.text
    return json.loads(outcome.text)


def hint_of(outcome) -> dict:
    return json.loads(outcome.text.splitlines()[-1].removeprefix("retry_hint: "))
