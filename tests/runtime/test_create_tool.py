"""create_tool on a stand-in run store: the example tried before the
coordinator's round was recorded is the one reported (it is not run again
under the run's lock), a failed one refuses the tool, and the round's valid
create_tool calls are the examples tried."""

from __future__ import annotations

import json
from contextlib import nullcontext

from agents.events import ListSink
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.tools import ToolCallMeta, ToolContext, ToolError, default_registry
from agents.tools.builtin.created import ToolSpec
from agents.tools.builtin.extending import RegisteredWorkflow, example_key, examples_to_try
from agents.tools.builtin.result_models import ShellRun
from agents.tools.builtin.shell import CommandRun

SPEC = {
    "name": "city_greeting",
    "description": "Greets a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    "command": 'jq -r .city <<<"$TOOL_INPUT"',
    "example_input": {"city": "Paris"},
}


class Host:
    """A run store that tried the example already and records what it is asked."""

    def __init__(self, tried: CommandRun | ToolError) -> None:
        self.trials = {example_key(ToolSpec.model_validate(SPEC)): tried}
        self.proposed: list[tuple[str, int, str]] = []

    def create_workflow(self, ctx: ToolContext, yaml_text: str) -> RegisteredWorkflow:
        raise AssertionError("not called")

    def check_new_tool(self, ctx: ToolContext, spec: ToolSpec) -> None:
        pass

    def tried_example(self, spec: ToolSpec) -> CommandRun | ToolError | None:
        return self.trials.get(example_key(spec))

    def propose_tool(self, ctx: ToolContext, spec: ToolSpec, example_exit_code: int, example_output: str) -> int:
        self.proposed.append((spec.name, example_exit_code, example_output))
        return 7

    def isolated(self, *, held: bool = False) -> nullcontext[None]:
        return nullcontext()


def call_create_tool(host: Host):
    registry = default_registry()
    sink = ListSink()
    meta = ToolCallMeta("run-1", f"run-1/{COORDINATOR}", f"{COORDINATOR}/1", "call-1")
    # No workspace: an example run now, under the lock, could not start.
    ctx = ToolContext(meta, COORDINATOR, "coordinator", MessageRouter(InMemoryMailboxStore(), sink), sink, host=host)
    tools = registry.for_role("coordinator", ["create_tool"])
    return registry.call(ctx, "create_tool", json.dumps({"spec": SPEC}), tools)


def test_it_reports_the_example_tried_before_the_round_was_recorded():
    host = Host(CommandRun(0, "exit code: 0\nParis\n", ShellRun(exit_code=0, output="Paris\n")))

    outcome = call_create_tool(host)

    assert outcome.ok, outcome.text
    assert json.loads(outcome.text)["result"] == {
        "name": "city_greeting",
        "status": "waiting_for_approval",
        "approval_id": 7,
        "example_exit_code": 0,
        "example_output": "exit code: 0\nParis\n",
    }
    assert host.proposed == [("city_greeting", 0, "exit code: 0\nParis\n")]


def test_a_tried_example_that_failed_refuses_the_tool():
    host = Host(ToolError("timed out after 20s; the command was stopped. Last output:\n(none)"))

    outcome = call_create_tool(host)

    assert not outcome.ok
    assert outcome.text.startswith("error: refused: the example of city_greeting did not run to its end")
    assert "timed out after 20s" in outcome.text
    assert host.proposed == []


def test_the_examples_tried_are_those_of_the_rounds_valid_create_tool_calls():
    calls = [
        ("create_tool", json.dumps({"spec": SPEC})),
        ("create_tool", json.dumps({"spec": {**SPEC, "example_input": {"city": 3}}})),  # does not fit: refused later
        ("create_tool", "not json"),
        ("run_shell", json.dumps({"command": "true"})),
    ]

    assert [spec.name for spec in examples_to_try(calls)] == ["city_greeting"]
