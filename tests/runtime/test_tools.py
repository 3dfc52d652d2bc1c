"""The tool registry: role gating, argument checking and the messaging tools."""

from __future__ import annotations

import json

import pytest

from agents.events import ListSink
from agents.llm.base import Completion, CompletionRequest, ToolCallRequest
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.runner import AgentSession, apply_completion
from agents.spec import AgentSpec
from agents.tools import ToolCallMeta, ToolContext, default_registry


class Run:
    """One run's router, store and sink, with a context per role."""

    def __init__(self, *steps: str) -> None:
        self.store = InMemoryMailboxStore()
        self.sink = ListSink()
        self.router = MessageRouter(self.store, self.sink)
        for step in steps:
            self.router.register(step)
        self.registry = default_registry()

    def context(self, step_id: str) -> ToolContext:
        role = "coordinator" if step_id == COORDINATOR else "step"
        meta = ToolCallMeta("run-1", f"run-1/{step_id}", f"{step_id}/1", "call-1")
        return ToolContext(meta, step_id, role, self.router, self.sink)

    def call(self, step_id: str, name: str, arguments: str | dict):
        ctx = self.context(step_id)
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return self.registry.call(ctx, name, raw, self.registry.for_role(ctx.role))

    def nothing_happened(self, *mailboxes: str) -> bool:
        return (
            self.sink.events == []
            and self.store.drops == []
            and all(self.store.unread(m) == [] for m in [COORDINATOR, *mailboxes])
        )


def test_it_gives_the_coordinator_only_management_tools():
    registry = default_registry()

    assert sorted(t.name for t in registry.for_role("coordinator")) == ["finalize", "forward_to_agent", "narrate"]
    assert [t.name for t in registry.for_role("step")] == ["send_message"]


def test_it_ignores_requested_tools_of_the_other_role():
    registry = default_registry()

    step_tools = registry.for_role("step", ["forward_to_agent", "finalize", "send_message"])
    coordinator_tools = registry.for_role("coordinator", ["send_message"])

    assert [t.name for t in step_tools] == ["send_message"]
    assert "send_message" not in [t.name for t in coordinator_tools]


def test_it_describes_each_tool_to_the_model_as_a_function_schema():
    registry = default_registry()
    [forward] = [t for t in registry.for_role("coordinator") if t.name == "forward_to_agent"]
    [send] = registry.for_role("step")

    schema = forward.schema()

    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "forward_to_agent"
    assert function["description"] == forward.description
    assert function["parameters"]["type"] == "object"
    assert set(function["parameters"]["properties"]) == {"target_step_id", "text", "kind"}
    assert sorted(function["parameters"]["required"]) == ["target_step_id", "text"]
    assert function["parameters"]["properties"]["kind"]["default"] == "info"
    assert "title" not in function["parameters"]
    # A field's title that only repeats its name is not sent (tokens on every
    # request); tool_schemas.json's entry keeps the schema as pydantic wrote it.
    assert [f for f in function["parameters"]["properties"].values() if "title" in f] == []
    catalog = forward.catalog_entry()["payload"]["schema"]["properties"]
    assert catalog["target_step_id"]["title"] == "Target Step Id"

    send_parameters = send.schema()["function"]["parameters"]
    assert set(send_parameters["properties"]) == {"text"}
    assert send_parameters["required"] == ["text"]


def test_it_keeps_the_tool_context_out_of_every_schema():
    injected = set(ToolContext.__dataclass_fields__)
    registry = default_registry()

    for tool in registry.for_role("coordinator") + registry.for_role("step"):
        parameters = tool.schema()["function"]["parameters"]
        assert set(parameters["properties"]).isdisjoint(injected), tool.name
        assert set(parameters.get("required", [])).isdisjoint(injected), tool.name


def test_it_refuses_send_message_to_the_coordinator_and_does_nothing():
    run = Run("writer")

    outcome = run.call(COORDINATOR, "send_message", {"text": "hi"})

    assert outcome.ok is False
    assert "not available to the coordinator" in outcome.text
    assert "Available tools: [" in outcome.text
    assert run.nothing_happened("writer")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("forward_to_agent", {"target_step_id": "writer", "text": "hi"}),
        ("finalize", {"summary": "done"}),
        ("narrate", {"text": "hello watchers"}),
    ],
)
def test_it_refuses_coordinator_tools_to_a_step_and_does_nothing(name, arguments):
    run = Run("research", "writer")

    outcome = run.call("research", name, arguments)

    assert outcome.ok is False
    assert outcome.text.startswith("error:")
    assert f"tool {name!r} is not available to the step" in outcome.text
    assert "Available tools: [send_message]" in outcome.text
    assert run.nothing_happened("research", "writer")


def test_it_refuses_a_forbidden_tool_inside_a_turn_without_running_it():
    run = Run("research", "writer")
    tools = run.registry.for_role("step")
    turn = AgentSession("run-1", "research", "researcher", AgentSpec(), "step", [{"role": "user", "content": "go"}])
    request = CompletionRequest(agent="researcher", messages=list(turn.transcript))
    arguments = json.dumps({"target_step_id": "writer", "text": "skip the coordinator"})
    completion = Completion(content=None, tool_calls=[ToolCallRequest("call-1", "forward_to_agent", arguments)])

    result = apply_completion(turn, request, completion, [], router=run.router, registry=run.registry, tools=tools)

    [record] = result.tool_calls
    assert record.ok is False
    assert "not available to the step" in record.result
    assert run.store.unread("writer") == []
    assert run.store.drops == []
    assert run.sink.types() == ["agent_turn", "tool_call", "tool_call"]


def test_it_lists_the_available_tools_for_an_unknown_tool():
    run = Run("writer")

    outcome = run.call(COORDINATOR, "spawn_agent", {"name": "helper"})

    assert outcome.ok is False
    first, hint = outcome.text.split("\n")
    assert first == "error: unknown tool 'spawn_agent'. Available tools: [forward_to_agent, narrate, finalize]"
    # What the model reads: Goa-AI's RetryHint names, with kind and action as aliases.
    assert json.loads(hint.removeprefix("retry_hint: ")) == {
        "reason": "tool_unavailable",
        "tool": "spawn_agent",
        "clarifying_question": "Which of these tools fits: forward_to_agent, narrate, finalize?",
        "message": "Do not repeat this call as it was: choose another tool or approach.",
        "kind": "invalid_call",
        "action": "replan",
    }
    assert run.nothing_happened("writer")


def test_it_reports_arguments_that_are_not_json():
    run = Run("research")

    outcome = run.call("research", "send_message", '{"text": "unterminated')

    assert outcome.ok is False
    assert outcome.text.startswith("error: arguments for send_message are not valid JSON")
    assert run.nothing_happened("research")


@pytest.mark.parametrize(
    ("step_id", "name", "arguments", "field"),
    [
        ("research", "send_message", {}, "text: Field required"),
        ("research", "send_message", {"text": ""}, "text: String should have at least 1 character"),
        ("research", "send_message", {"text": 42}, "text: Input should be a valid string"),
        (COORDINATOR, "forward_to_agent", {"text": "hi"}, "target_step_id: Field required"),
        (COORDINATOR, "forward_to_agent", {"target_step_id": 7, "text": "hi"}, "target_step_id: Input should be"),
        (COORDINATOR, "finalize", {"summary": ""}, "summary: String should have at least 1 character"),
        (COORDINATOR, "narrate", [], "(root): Input should be"),
    ],
)
def test_it_names_the_field_of_invalid_arguments_and_sends_nothing(step_id, name, arguments, field):
    run = Run("research", "writer")

    outcome = run.call(step_id, name, arguments)

    assert outcome.ok is False
    assert outcome.text.startswith(f"error: invalid arguments for {name}: ")
    assert field in outcome.text
    assert run.nothing_happened("research", "writer")


def test_it_sends_a_step_message_through_the_router():
    run = Run("research")

    outcome = run.call("research", "send_message", {"text": "notes ready"})

    assert outcome.ok is True
    assert outcome.text == '{"result": {"status": "queued", "message_id": "msg-send-1"}}'
    assert outcome.arguments == {"text": "notes ready"}
    assert [m.content for m in run.store.unread(COORDINATOR)] == ["notes ready"]
    assert run.sink.types() == ["message_sent"]


def test_it_forwards_and_announces_a_coordinator_message():
    run = Run("writer")

    outcome = run.call(COORDINATOR, "forward_to_agent", {"target_step_id": "writer", "text": "go", "kind": "yell"})

    assert outcome.text == '{"result": {"status": "queued", "message_id": "msg-fwd-1"}}'
    assert outcome.arguments == {"target_step_id": "writer", "text": "go", "kind": "yell"}
    [message] = run.store.unread("writer")
    assert str(message.type) == "info"
    assert run.sink.types() == ["message_sent", "coordinator_message"]
    assert run.sink.events[1].data == {"to": "writer", "message_id": "msg-fwd-1", "text": "go"}


def test_it_returns_the_drop_to_the_coordinator_without_announcing_it():
    run = Run("writer")

    outcome = run.call(COORDINATOR, "forward_to_agent", {"target_step_id": "editor", "text": "go"})

    # A drop is a result the model can act on, not a failed call.
    assert outcome.ok is True
    assert json.loads(outcome.text)["result"] | {"detail": ""} == {
        "status": "dropped",
        "message_id": "msg-fwd-1",
        "reason": "unknown-step",
        "detail": "",
    }
    assert run.sink.types() == ["message_dropped"]


def test_it_narrates():
    run = Run()

    outcome = run.call(COORDINATOR, "narrate", {"text": "research is under way"})

    assert outcome.ok is True
    assert outcome.text == '{"result": {"status": "narrated"}}'
    [event] = run.sink.events
    assert event.type == "coordinator_narration"
    assert event.step_id == COORDINATOR
    assert event.data == {"text": "research is under way"}


def test_it_finalizes_and_keeps_the_last_summary():
    run = Run()
    ctx = run.context(COORDINATOR)
    tools = run.registry.for_role("coordinator")

    first = run.registry.call(ctx, "finalize", json.dumps({"summary": "draft summary"}), tools)
    second = run.registry.call(ctx, "finalize", json.dumps({"summary": "final summary"}), tools)

    assert first.text == second.text == '{"result": {"status": "finalized"}}'
    assert ctx.finalized[-1] == "final summary"
    assert run.sink.types() == ["coordinator_synthesis", "coordinator_synthesis"]
    assert [e.data["summary"] for e in run.sink.events] == ["draft summary", "final summary"]


def test_it_reports_the_last_finalize_of_a_turn():
    run = Run()
    tools = run.registry.for_role("coordinator")
    turn = AgentSession("run-1", COORDINATOR, COORDINATOR, AgentSpec(), "coordinator", [])
    request = CompletionRequest(agent=COORDINATOR, messages=[{"role": "user", "content": "finish"}])
    completion = Completion(
        content=None,
        tool_calls=[
            ToolCallRequest("call-1", "finalize", json.dumps({"summary": "first"})),
            ToolCallRequest("call-2", "finalize", json.dumps({"summary": "second"})),
            ToolCallRequest("call-3", "narrate", json.dumps({"text": "all done"})),
        ],
    )

    result = apply_completion(turn, request, completion, [], router=run.router, registry=run.registry, tools=tools)

    assert result.finalized == "second"
    assert [r.result for r in result.tool_calls] == [
        '{"result": {"status": "finalized"}}',
        '{"result": {"status": "finalized"}}',
        '{"result": {"status": "narrated"}}',
    ]
    assert [e.data["summary"] for e in run.sink.of_type("coordinator_synthesis")] == ["first", "second"]


def test_it_refuses_a_tool_outside_the_role_even_when_the_caller_lists_it():
    run = Run("a")
    ctx = run.context("a")
    every_tool = [run.registry.for_role("coordinator")[0], *run.registry.for_role("step")]

    outcome = run.registry.call(ctx, every_tool[0].name, json.dumps({"target_step_id": "a", "text": "x"}), every_tool)

    assert not outcome.ok
    assert "not available to the step" in outcome.text
    assert run.nothing_happened("a")


def hint_of(outcome) -> dict:
    line = outcome.text.splitlines()[-1]
    assert line.startswith("retry_hint: ")
    return json.loads(line.removeprefix("retry_hint: "))


def test_it_hints_how_to_correct_invalid_arguments():
    run = Run("writer")

    outcome = run.call(COORDINATOR, "forward_to_agent", {"target_step_id": "writer", "txt": "hi"})

    assert outcome.text.startswith("error: invalid arguments for forward_to_agent: text: Field required")
    assert hint_of(outcome) == {
        "reason": "invalid_arguments",  # txt is not missing: it is wrong
        "tool": "forward_to_agent",
        "restrict_to_tool": True,
        "missing_fields": ["text", "txt"],
        "prior_input": {"target_step_id": "writer", "txt": "hi"},
        "example_input": {"target_step_id": "...", "text": "..."},
        "message": "Correct the arguments and call this tool again.",
        "kind": "invalid_call",
        "action": "correct_call",
    }
    missing = run.call(COORDINATOR, "forward_to_agent", {"target_step_id": "writer"})
    assert (hint_of(missing)["reason"], hint_of(missing)["missing_fields"]) == ("missing_fields", ["text"])


def test_it_hints_with_the_raw_input_when_the_arguments_are_not_json():
    run = Run("writer")

    outcome = run.call("writer", "send_message", '{"text": "unterminated')

    assert hint_of(outcome) == {
        "reason": "invalid_arguments",
        "tool": "send_message",
        "restrict_to_tool": True,
        "prior_input": '{"text": "unterminated',
        "example_input": {"text": "..."},
        "message": "Correct the arguments and call this tool again.",
        "kind": "invalid_call",
        "action": "correct_call",
    }


def test_it_sends_back_a_preview_of_an_argument_too_long_to_repeat():
    # The schema refuses a 200,000-character message; the model reads the
    # failure on every later turn of its step, so it holds a preview.
    run = Run("writer")

    outcome = run.call("writer", "send_message", {"text": "x" * 200_000})

    assert outcome.text.startswith("error: invalid arguments for send_message: text: String should have at most")
    assert len(outcome.text) < 3_000
    assert hint_of(outcome)["prior_input"] == {
        "omitted": True,
        "reason": "size_limit",
        "chars": len(json.dumps({"text": "x" * 200_000})),
        "preview": json.dumps({"text": "x" * 200_000})[:1_000],
    }


def test_it_lists_every_tool_in_the_catalog_shape():
    catalog = default_registry().catalog()

    ids = [tool["id"] for tool in catalog["tools"]]
    assert ids == sorted(ids)
    assert {
        "zenweb.messaging.finalize",
        "zenweb.messaging.forward_to_agent",
        "zenweb.messaging.narrate",
        "zenweb.messaging.send_message",
        "zenweb.orchestration.spawn_worker",
    } <= set(ids)
    [send] = [tool for tool in catalog["tools"] if tool["id"] == "zenweb.messaging.send_message"]
    assert set(send) == {"id", "service", "toolset", "title", "description", "tags", "payload", "result", "server_data"}
    assert send["payload"]["name"] == "SendMessageArgs"
    assert send["payload"]["schema"]["required"] == ["text"]


def test_a_tool_errors_cause_chain_reaches_the_model():
    from agents.tools.base import ToolError
    from agents.tools.errors import RetryHint, failure_text

    root = OSError("connection reset by peer")
    try:
        try:
            raise ToolError("the child run failed", kind="unavailable", cause=root)
        except ToolError as inner:
            raise ToolError("workflow tool summarize failed", kind="unavailable") from inner
    except ToolError as outer:
        error = outer

    assert error.causes() == ["the child run failed", "OSError: connection reset by peer"]
    assert ToolError.from_error(root).cause is root
    text = failure_text(str(error), RetryHint(error.kind, error.action, tool="summarize"), error.causes())
    assert text.splitlines()[:3] == [
        "error: workflow tool summarize failed",
        "cause: the child run failed",
        "cause: OSError: connection reset by peer",
    ]
    assert json.loads(text.splitlines()[-1].removeprefix("retry_hint: "))["reason"] == "tool_unavailable"
