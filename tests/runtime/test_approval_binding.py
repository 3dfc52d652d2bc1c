"""Without a database: a destructive run's calls with effects run only as
shown to the approver; script inputs go into shell commands quoted; path
inputs stay inside the workspace."""

from __future__ import annotations

import json
import subprocess

import pytest

from agents.events import ListSink
from agents.inputs import workspace_path
from agents.llm.scripted import render_call
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.tools import ToolCallMeta, ToolContext, default_registry
from agents.tools.registry import call_key


class Host:
    """Records the approvals asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict]] = []

    def isolated(self, *, held=False):
        from contextlib import nullcontext

        return nullcontext()

    def request_approval(self, ctx, tool, arguments):
        self.asked.append((tool, arguments))
        return "41"


def call(workspace, name: str, arguments: dict, *, bound: frozenset[str] | None):
    host = Host()
    registry = default_registry()
    ctx = ToolContext(
        ToolCallMeta("run-1", "run-1/clean", "clean/1", "call-1"),
        "clean",
        "step",
        MessageRouter(InMemoryMailboxStore(), ListSink()),
        ListSink(),
        host=host,  # type: ignore[arg-type]
        injected={"workspace": str(workspace)},
        destructive_approved=True,
        bound=bound,
    )
    outcome = registry.call(ctx, name, json.dumps(arguments), registry.for_role("step", [name]))
    return outcome, host.asked


@pytest.mark.sandbox
def test_it_runs_a_call_shown_at_approval_without_asking_again(tmp_path):
    shown = {"command": "echo shown > out.txt"}

    outcome, asked = call(tmp_path, "run_shell", shown, bound=frozenset({call_key("run_shell", shown)}))

    assert (outcome.ok, outcome.pending, asked) == (True, False, [])
    assert (tmp_path / "out.txt").read_text() == "shown\n"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("run_shell", {"command": "rm -rf ../run-6"}),
        # Identical but for one argument is another call.
        ("run_shell", {"command": "echo shown > out.txt", "timeout": 5}),
        ("write_file", {"path": "out.txt", "content": "overwritten"}),
    ],
)
def test_it_asks_again_for_a_call_with_effects_that_was_not_shown(tmp_path, name, arguments):
    shown = {"command": "echo shown > out.txt"}

    outcome, asked = call(tmp_path, name, arguments, bound=frozenset({call_key("run_shell", shown)}))

    assert (outcome.ok, outcome.pending, outcome.approval_id) == (True, True, "41")
    assert [tool for tool, _ in asked] == [name]
    assert not (tmp_path / "out.txt").exists()


def test_it_lets_calls_without_effects_through_in_a_bound_run(tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")

    outcome, asked = call(tmp_path, "read_file", {"path": "notes.txt"}, bound=frozenset())

    assert (outcome.ok, outcome.pending, asked) == (True, False, [])


@pytest.mark.parametrize(
    "value",
    ["x; touch pwned", "$(touch pwned)", "`touch pwned`", "a\ntouch pwned", "'; touch pwned; '", "a && touch pwned"],
)
def test_it_quotes_inputs_substituted_into_a_shell_command(tmp_path, value):
    command = render_call("run_shell", {"command": "mkdir -p -- $target && echo made $target"}, {"target": value})[
        "command"
    ]

    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True)

    assert done.stdout == f"made {value}\n"
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / value).is_dir()


def test_it_leaves_other_arguments_unquoted():
    rendered = render_call("send_message", {"text": "for janitor: clean $target"}, {"target": "a b"})

    assert rendered == {"text": "for janitor: clean a b"}


@pytest.mark.parametrize(
    ("value", "normal"), [("build", "build"), ("out/./bin/", "out/bin"), ("a/../b", "b"), (" build ", "build")]
)
def test_it_keeps_a_path_input_inside_the_workspace(value, normal):
    assert workspace_path(value) == normal


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("../run-7", "leads out of the workspace"),
        ("a/../../run-7", "leads out of the workspace"),
        ("..", "leads out of the workspace"),
        ("/etc", "not inside the workspace"),
        ("~root", "not inside the workspace"),
        ("a\nb", "control characters"),
        ("a\x00b", "control characters"),
        ("-rf", "cannot start with '-'"),
        ("a/--help", "cannot start with '-'"),
        ("", "cannot be empty"),
        (3, "must be text"),
    ],
)
def test_it_refuses_a_path_input_that_is_not_a_place_in_the_workspace(value, why):
    with pytest.raises(ValueError, match=why):
        workspace_path(value)


def test_it_refuses_a_path_default_outside_the_workspace_with_its_line():
    from agents.spec import WorkflowValidationError, parse_workflow

    text = (
        "name: w\ninputs:\n  target: {type: path, default: ../other}\n"
        "agents: {a: {description: a agent}}\n"
        "steps: [{id: s, agent: a}]\n"
    )

    with pytest.raises(WorkflowValidationError) as caught:
        parse_workflow(text, "w.yaml")

    assert "w.yaml:3" in str(caught.value)
    assert "leads out of the workspace" in str(caught.value)
