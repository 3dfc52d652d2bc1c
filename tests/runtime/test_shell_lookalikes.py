"""The destructive-command pattern is a hint for the approval screen, not a
security control (issue 25): each of these gets past it, and what keeps
another run's workspace safe is the sandbox (only the run's own workspace is
visible to a command). Each runs in a run that was never approved for
destructive work."""

from __future__ import annotations

import json

import pytest

from agents.events import ListSink
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.tools import ToolCallMeta, ToolContext, default_registry

pytestmark = pytest.mark.sandbox

LOOKALIKES = [
    '"rm" -rf ../run-6',
    "rm --recurs ../run-6",
    "r\\m -fr ../run-6",
    "X=-rf; rm $X ../run-6",
    "python3 -c \"import shutil; shutil.rmtree('../run-6')\"",
    "perl -MFile::Path -e 'rmtree(\"../run-6\")'",
]


@pytest.mark.parametrize("command", LOOKALIKES)
def test_a_delete_the_pattern_misses_cannot_reach_another_runs_workspace(tmp_path, command):
    workspace = tmp_path / "workspaces" / "run-1"
    workspace.mkdir(parents=True)
    other = tmp_path / "workspaces" / "run-6"
    other.mkdir()
    (other / "report.txt").write_text("another run's work")
    registry = default_registry()
    ctx = ToolContext(
        ToolCallMeta("run-1", "run-1/build", "build/1", "call-1"),
        "build",
        "step",
        MessageRouter(InMemoryMailboxStore(), ListSink()),
        ListSink(),
        injected={"workspace": str(workspace)},
    )

    outcome = registry.call(
        ctx, "run_shell", json.dumps({"command": command}), registry.for_role("step", ["run_shell"])
    )

    assert outcome.ok and "exit_code" in json.loads(outcome.text)["result"]  # it ran: nothing refused it
    assert (other / "report.txt").read_text() == "another run's work"
