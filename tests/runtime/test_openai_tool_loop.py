"""Agent turns through the real openai SDK: the runner builds the request, the
OpenAIProvider sends it to a local chat-completions server, the runner runs the
tool calls that come back. No database: an in-memory router and event list."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel

from agents.events import ListSink
from agents.llm.openai import OpenAIProvider
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.runner import AgentSession, ToolEnv, TurnResult, apply_completion, build_request
from agents.spec import AgentSpec
from agents.tools.base import Tool, ToolContext
from agents.tools.registry import ToolRegistry
from tests.fake_openai_server import FakeOpenAIServer

STEP = "research"
WORKSPACE = "/tmp/ws"


class ReadNoteArgs(BaseModel):
    path: str
    # Filled in by the runtime from ToolEnv.injected; the model never sees it.
    workspace: str


@dataclass
class NoteReader:
    """A read_note tool that remembers every call it got."""

    calls: list[ReadNoteArgs] = field(default_factory=list)

    def run(self, ctx: ToolContext, args: ReadNoteArgs) -> str:
        self.calls.append(args)
        return f"contents of {args.path} in {args.workspace}"

    def tool(self) -> Tool:
        return Tool(
            name="read_note",
            description="Read one of the run's notes.",
            args_model=ReadNoteArgs,
            roles=frozenset({"step"}),
            run=self.run,
            injected=("workspace",),
        )


@pytest.fixture(autouse=True)
def _no_ambient_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx2 and the SDK read these from os.environ; requests must reach the fake server as sent.
    for name in ("OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


class Step:
    """One step agent talking to the fake server, as a worker drives it:
    build the request, ask the model, record the answer, carry the transcript on."""

    def __init__(self, server: FakeOpenAIServer) -> None:
        self.reader = NoteReader()
        self.tools = [self.reader.tool()]
        self.registry = ToolRegistry(self.tools)
        self.sink = ListSink()
        self.router = MessageRouter(InMemoryMailboxStore(), self.sink)
        self.router.register(STEP)
        self.provider = OpenAIProvider(base_url=server.base_url, api_key="sk-test", model="fake-model", max_retries=0)
        self.turn = AgentSession(
            "run-1",
            STEP,
            "researcher",
            AgentSpec(),
            "step",
            [
                {"role": "system", "content": "You research."},
                {"role": "user", "content": "Summarise the notes."},
            ],
            env=ToolEnv(injected={"workspace": WORKSPACE}),
        )

    def take_turn(self) -> TurnResult:
        inbox = self.router.store.unread(STEP)
        request = build_request(self.turn, self.tools, inbox)
        completion = self.provider.complete(request)
        result = apply_completion(
            self.turn,
            request,
            completion,
            inbox,
            router=self.router,
            registry=self.registry,
            tools=self.tools,
        )
        self.turn.transcript = result.transcript
        return result


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in body["messages"] if message["role"] == "tool"]


def test_it_runs_a_tool_call_round_trip_without_showing_the_model_injected_fields(
    server: FakeOpenAIServer,
) -> None:
    step = Step(server)
    server.push_tool_calls([("call_1", "read_note", '{"path": "tides.md"}')], prompt_tokens=30, completion_tokens=7)
    server.push_text("The tides are high.", prompt_tokens=45, completion_tokens=6)

    first = step.take_turn()
    second = step.take_turn()

    # What the model was offered: the tool without its injected field.
    [offered] = server.requests[0].body["tools"]
    assert offered["function"]["name"] == "read_note"
    parameters = offered["function"]["parameters"]
    assert set(parameters["properties"]) == {"path"}
    assert parameters["required"] == ["path"]
    assert "workspace" not in json.dumps(server.requests[0].body)
    assert server.requests[0].body["parallel_tool_calls"] is True
    # The tool got the injected value all the same.
    [args] = step.reader.calls
    assert (args.path, args.workspace) == ("tides.md", WORKSPACE)
    assert first.status == "continue"
    [record] = first.tool_calls
    assert record.ok
    assert record.outcome.arguments == {"path": "tides.md", "workspace": "[injected]"}
    # The result went back to the model, and the model finished.
    assert tool_messages(server.requests[1].body) == [
        {"role": "tool", "tool_call_id": "call_1", "content": f"contents of tides.md in {WORKSPACE}"}
    ]
    assert second.status == "completed"
    assert second.output == "The tides are high."
    # Token usage, per turn.
    assert (first.prompt_tokens, first.completion_tokens) == (30, 7)
    assert (second.prompt_tokens, second.completion_tokens) == (45, 6)
    turns = step.sink.of_type("agent_turn")
    assert [(e.data["prompt_tokens"], e.data["completion_tokens"]) for e in turns] == [(30, 7), (45, 6)]


def test_it_repairs_a_malformed_tool_call_argument(server: FakeOpenAIServer) -> None:
    step = Step(server)
    server.push_tool_calls([("call_1", "read_note", '{"path": ')])
    server.push_tool_calls([("call_2", "read_note", '{"path": "tides.md"}')])
    server.push_text("Done.")

    broken = step.take_turn()

    [failed] = broken.tool_calls
    assert not failed.ok
    assert failed.outcome.error_kind == "invalid_call"
    assert failed.result.startswith("error: arguments for read_note are not valid JSON")
    assert "\nretry_hint: " in failed.result
    hint = json.loads(failed.result.split("\nretry_hint: ", 1)[1])
    assert hint["action"] == "correct_call"
    assert hint["prior_input"] == '{"path": '
    assert hint["example_input"] == {"path": "..."}
    assert step.reader.calls == []
    assert broken.status == "continue"

    repaired = step.take_turn()

    # The model saw its own broken call and the error before trying again.
    second_request = server.requests[1].body
    assert second_request["messages"][-2]["tool_calls"][0]["function"]["arguments"] == '{"path": '
    assert tool_messages(second_request) == [{"role": "tool", "tool_call_id": "call_1", "content": failed.result}]
    [fixed] = repaired.tool_calls
    assert fixed.ok
    assert fixed.result == f"contents of tides.md in {WORKSPACE}"
    assert [(a.path, a.workspace) for a in step.reader.calls] == [("tides.md", WORKSPACE)]

    done = step.take_turn()

    assert done.status == "completed"
    assert [m["tool_call_id"] for m in tool_messages(server.requests[2].body)] == ["call_1", "call_2"]


def test_it_runs_parallel_tool_calls_in_order(server: FakeOpenAIServer) -> None:
    step = Step(server)
    server.push_tool_calls(
        [
            ("call_a", "read_note", '{"path": "a.md"}'),
            ("call_b", "read_note", '{"path": "b.md"}'),
        ]
    )
    server.push_text("Both read.")

    first = step.take_turn()
    second = step.take_turn()

    assert [a.path for a in step.reader.calls] == ["a.md", "b.md"]
    assert [(r.tool_call_id, r.ok) for r in first.tool_calls] == [("call_a", True), ("call_b", True)]
    # One assistant message with both calls, then both results, in the model's order.
    messages = server.requests[1].body["messages"]
    assert [c["id"] for c in messages[-3]["tool_calls"]] == ["call_a", "call_b"]
    assert messages[-2:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": f"contents of a.md in {WORKSPACE}"},
        {"role": "tool", "tool_call_id": "call_b", "content": f"contents of b.md in {WORKSPACE}"},
    ]
    assert second.output == "Both read."
    ends = [e.data for e in step.sink.of_type("tool_call") if e.data["phase"] == "end"]
    assert [(e["tool_call_id"], e["ok"]) for e in ends] == [("call_a", True), ("call_b", True)]
