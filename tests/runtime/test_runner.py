"""Agent turns with the scripted model: requests, completions, events and prompts."""

from __future__ import annotations

import json

import pytest

from agents.events import ListSink
from agents.llm.base import CompletionRequest, ProviderError
from agents.llm.scripted import ScriptedProvider
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.runner import (
    MAX_DEPENDENCY_CHARS,
    MAX_PROMPT_CHARS,
    TRUNCATION_MARKER,
    AgentSession,
    TurnResult,
    apply_completion,
    build_request,
    new_step_transcript,
    step_prompt,
)
from agents.spec import AgentSpec, WorkflowSpec, parse_workflow
from agents.tools import default_registry

WORKFLOW = """\
name: tides
inputs:
  query: {type: string, required: true}
agents:
  researcher:
    description: researcher agent
    tools: [send_message]
    script:
      - calls: [{tool: send_message, args: {text: "for write: focus on $query"}}]
      - say: "notes on $query"
  writer:
    description: writer agent
    script:
      - say: "a draft about $query, unlike $unknown"
  flaky:
    description: flaky agent
    script:
      - fail: "the model for $query is down"
  plain: {description: plain agent}
steps:
  - {id: research, agent: researcher, instructions: Research $query}
  - {id: write, agent: writer, dependsOn: [research]}
  - {id: flake, agent: flaky}
  - {id: chat, agent: plain, instructions: "Say hello\\nand more"}
"""

REGISTRY = default_registry()


class Run:
    """One run of WORKFLOW: a router over an in-memory store, and its events."""

    def __init__(self) -> None:
        self.spec: WorkflowSpec = parse_workflow(WORKFLOW)
        self.store = InMemoryMailboxStore()
        self.sink = ListSink()
        self.router = MessageRouter(self.store, self.sink)
        for step in self.spec.steps:
            self.router.register(step.id)

    def step_turn(self, step_id: str, **variables: str) -> AgentSession:
        step = self.spec.step(step_id)
        agent = self.spec.agents[step.agent]
        transcript = new_step_transcript(step_id, agent, step_prompt(step.instructions, {}))
        return AgentSession("run-1", step_id, step.agent, agent, "step", transcript, dict(variables))

    def coordinator_turn(self, **variables: str) -> AgentSession:
        transcript = [{"role": "system", "content": "You coordinate."}, {"role": "user", "content": "wake"}]
        return AgentSession("run-1", COORDINATOR, COORDINATOR, AgentSpec(), "coordinator", transcript, variables)

    def take_turn(self, turn: AgentSession, provider: ScriptedProvider) -> TurnResult:
        """What a worker does: show the model its unread inbox, record the answer."""
        tools = REGISTRY.for_role(turn.role, turn.agent.tools)
        inbox = self.store.unread(turn.step_id)
        request = build_request(turn, tools, inbox)
        result = apply_completion(
            turn,
            request,
            provider.complete(request),
            inbox,
            router=self.router,
            registry=REGISTRY,
            tools=tools,
        )
        turn.transcript = result.transcript
        return result


def test_it_continues_a_step_after_a_send_message_call():
    run = Run()
    turn = run.step_turn("research", query="tides")
    provider = ScriptedProvider(turn.agent.script)

    result = run.take_turn(turn, provider)

    assert result.status == "continue"
    assert result.output == ""
    *_, assistant, tool = result.transcript
    assert assistant["role"] == "assistant"
    [call] = assistant["tool_calls"]
    assert call["id"] == "call-researcher-1-1"
    assert call["function"]["name"] == "send_message"
    assert json.loads(call["function"]["arguments"]) == {"text": "for write: focus on tides"}
    assert tool == {
        "role": "tool",
        "tool_call_id": "call-researcher-1-1",
        "content": '{"result": {"status": "queued", "message_id": "msg-send-1"}}',
    }

    assert run.sink.types() == ["agent_turn", "tool_call", "message_sent", "tool_call"]
    agent_turn, start, sent, end = run.sink.events
    assert agent_turn.data["turn"] == 1
    assert agent_turn.data["tool_calls"] == ["send_message"]
    assert start.data["phase"] == "start"
    assert start.data["name"] == "send_message"
    assert sent.data["to"] == COORDINATOR
    assert end.data["phase"] == "end"
    assert end.data["ok"] is True
    assert end.data["result"] == '{"result": {"status": "queued", "message_id": "msg-send-1"}}'
    assert [m.content for m in run.store.unread(COORDINATOR)] == ["for write: focus on tides"]

    second = run.take_turn(turn, provider)

    assert second.status == "completed"
    assert second.output == "notes on tides"
    assert provider.calls == len(turn.agent.script)


def test_it_shows_a_forwarded_message_under_a_header_naming_the_sender():
    run = Run()
    run.router.forward("write", "focus on tides")
    turn = run.step_turn("write", query="tides")
    tools = REGISTRY.for_role("step")
    inbox = run.store.unread("write")

    request = build_request(turn, tools, inbox)

    assert request.messages[:-1] == turn.transcript
    last = request.messages[-1]
    assert last["role"] == "user"
    assert "[message msg-fwd-1 from coordinator (info)]\nfocus on tides" in last["content"]
    assert request.agent == "writer"
    assert [t["function"]["name"] for t in request.tools] == ["send_message"]


def test_it_drains_only_the_messages_the_model_was_shown():
    run = Run()
    run.router.forward("write", "focus on tides")
    turn = run.step_turn("write", query="tides")
    tools = REGISTRY.for_role("step")
    inbox = run.store.unread("write")
    request = build_request(turn, tools, inbox)
    # Arrives while the model is thinking.
    run.router.forward("write", "also mention moons")

    result = apply_completion(
        turn,
        request,
        ScriptedProvider(turn.agent.script).complete(request),
        inbox,
        router=run.router,
        registry=REGISTRY,
        tools=tools,
    )

    assert [e.data["message_id"] for e in run.sink.of_type("agent_inbox_drain")] == ["msg-fwd-1"]
    assert [m.content for m in run.store.unread("write")] == ["also mention moons"]
    assert "focus on tides" in result.transcript[-2]["content"]


def test_it_completes_a_step_with_its_final_answer_and_substitutes_variables():
    run = Run()
    turn = run.step_turn("write", query="tides")

    result = run.take_turn(turn, ScriptedProvider(turn.agent.script))

    assert result.status == "completed"
    # Unknown variables are left as written rather than failing the turn.
    assert result.output == "a draft about tides, unlike $unknown"
    assert result.transcript[-1] == {"role": "assistant", "content": result.output}
    assert result.tool_calls == []
    assert run.sink.types() == ["agent_turn"]
    assert run.sink.events[0].data["content"] == result.output


def test_it_answers_once_for_an_agent_without_a_script():
    run = Run()
    turn = run.step_turn("chat")

    result = run.take_turn(turn, ScriptedProvider())

    assert result.status == "completed"
    assert result.output == "plain finished: Say hello"


def test_it_names_the_agent_whose_script_ran_out():
    run = Run()
    turn = run.step_turn("write", query="tides")
    provider = ScriptedProvider(turn.agent.script)
    run.take_turn(turn, provider)

    with pytest.raises(ProviderError, match="agent 'writer' has 1 turns and turn 2 was asked for"):
        run.take_turn(turn, provider)


def test_it_raises_the_text_of_a_fail_entry():
    run = Run()
    turn = run.step_turn("flake", query="tides")

    with pytest.raises(ProviderError, match="^the model for tides is down$"):
        run.take_turn(turn, ScriptedProvider(turn.agent.script))

    assert run.sink.events == []


def test_it_forwards_addressed_messages_and_narrates_the_rest():
    run = Run()
    run.router.send("research", "for write: use the notes")
    run.router.send("write", "halfway there")
    run.router.send("write", "@write: note to self")
    inbox = run.store.unread(COORDINATOR)
    turn = run.coordinator_turn(
        wake_reason="message",
        inbox_json=json.dumps([{"from": m.sender, "content": m.content, "type": str(m.type)} for m in inbox]),
    )

    result = run.take_turn(turn, ScriptedProvider())

    assert result.status == "continue"
    calls = [(r.name, json.loads(r.arguments)) for r in result.tool_calls]
    assert calls == [
        ("forward_to_agent", {"target_step_id": "write", "text": "use the notes"}),
        ("narrate", {"text": "write says: halfway there"}),
        # A step cannot address itself through the coordinator.
        ("narrate", {"text": "write says: @write: note to self"}),
    ]
    assert [r.result for r in result.tool_calls] == [
        '{"result": {"status": "queued", "message_id": "msg-fwd-4"}}',
        '{"result": {"status": "narrated"}}',
        '{"result": {"status": "narrated"}}',
    ]
    assert [m.content for m in run.store.unread("write")] == ["use the notes"]
    assert run.store.unread(COORDINATOR) == []
    assert len(run.sink.of_type("coordinator_inbox_message")) == 3
    assert len(run.sink.of_type("coordinator_narration")) == 2

    # Its tool results in, the coordinator ends the round.
    after = run.take_turn(turn, ScriptedProvider())

    assert after.status == "completed"
    assert after.output == "ok"


def test_it_has_nothing_to_do_with_an_empty_inbox():
    run = Run()
    turn = run.coordinator_turn(wake_reason="message", inbox_json="[]")

    result = run.take_turn(turn, ScriptedProvider())

    assert result.status == "completed"
    assert result.output == "nothing to do"


def test_it_finalizes_with_every_output_when_the_run_finishes():
    run = Run()
    turn = run.coordinator_turn(
        wake_reason="finish",
        inbox_json="[]",
        outputs_json=json.dumps({"research": "notes on tides", "write": "a draft"}),
    )

    result = run.take_turn(turn, ScriptedProvider())

    assert [r.name for r in result.tool_calls] == ["finalize"]
    assert result.finalized == "research: notes on tides\nwrite: a draft"
    [synthesis] = run.sink.of_type("coordinator_synthesis")
    assert synthesis.data["summary"] == result.finalized


def test_it_plays_a_coordinator_script_before_its_policy():
    provider = ScriptedProvider(parse_workflow(WORKFLOW).agents["writer"].script)
    request = CompletionRequest(agent=COORDINATOR, messages=[], variables={"query": "tides"})

    assert provider.complete(request).content == "a draft about tides, unlike $unknown"

    request = CompletionRequest(
        agent=COORDINATOR,
        messages=[{"role": "assistant", "content": "a draft"}],
        variables={"wake_reason": "finish", "outputs_json": "{}"},
    )
    [call] = provider.complete(request).tool_calls
    assert call.name == "finalize"
    assert json.loads(call.arguments) == {"summary": "No step produced output."}


def test_it_truncates_a_long_dependency_output_and_keeps_short_ones():
    long_output = "x" * (MAX_DEPENDENCY_CHARS + 1000)
    exact_output = "y" * MAX_DEPENDENCY_CHARS

    prompt = step_prompt("Write the report.", {"research": long_output, "exact": exact_output, "notes": "short"})

    assert MAX_DEPENDENCY_CHARS == 8 * 1024
    assert TRUNCATION_MARKER == "...[truncated for context limit]"
    kept = "x" * (MAX_DEPENDENCY_CHARS - len(TRUNCATION_MARKER))
    assert f"## Output of step research\n{kept}{TRUNCATION_MARKER}\n\n" in prompt
    assert kept + "x" not in prompt
    assert f"## Output of step exact\n{exact_output}\n\n" in prompt
    assert prompt.startswith("Write the report.\n\n")
    assert prompt.endswith("## Output of step notes\nshort")
    assert prompt.count(TRUNCATION_MARKER) == 1


def test_it_caps_the_whole_prompt():
    outputs = {f"step{n}": "z" * MAX_DEPENDENCY_CHARS for n in range(20)}

    prompt = step_prompt("Merge.", outputs)

    assert len(prompt) == MAX_PROMPT_CHARS
    assert prompt.endswith(TRUNCATION_MARKER)


def test_it_gives_a_step_without_instructions_a_default_task():
    assert step_prompt("   ", {}) == "Do your part of the workflow."
