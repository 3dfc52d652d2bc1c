"""OpenAIProvider against the real openai SDK and a local chat-completions
server: the request it sends, and the answer, tool calls and usage it reads."""

from __future__ import annotations

import json

import pytest

from agents.llm import CompletionRequest, ToolCallRequest, Usage
from tests.fake_openai_server import FakeOpenAIServer
from tests.runtime.openai_requests import MESSAGES, WEATHER_TOOL, make_provider

pytestmark = pytest.mark.usefixtures("no_ambient_openai_configuration")


def test_it_returns_a_text_answer_with_usage(server: FakeOpenAIServer) -> None:
    server.push_text("It is sunny.", prompt_tokens=21, completion_tokens=4)

    completion = make_provider(server).complete(CompletionRequest(agent="researcher", messages=MESSAGES))

    assert completion.content == "It is sunny."
    assert completion.tool_calls == []
    assert completion.usage == Usage(prompt_tokens=21, completion_tokens=4)
    [seen] = server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.body["model"] == "default-model"


def test_it_turns_tool_calls_into_requests_and_sends_the_request_as_given(
    server: FakeOpenAIServer,
) -> None:
    server.push_tool_calls(
        [
            ("call_1", "get_weather", '{"city": "Oslo"}'),
            ("call_2", "get_weather", '{"city": "Bergen", '),
        ]
    )
    request = CompletionRequest(
        agent="researcher",
        messages=MESSAGES,
        tools=[WEATHER_TOOL],
        model="tool-model",
        temperature=0.4,
    )

    completion = make_provider(server).complete(request)

    assert completion.content is None
    # Arguments stay the model's raw text, even when it is not valid JSON.
    assert completion.tool_calls == [
        ToolCallRequest(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCallRequest(id="call_2", name="get_weather", arguments='{"city": "Bergen", '),
    ]
    [seen] = server.requests
    assert seen.body["messages"] == MESSAGES
    assert seen.body["tools"] == [WEATHER_TOOL]
    assert seen.body["parallel_tool_calls"] is True
    assert seen.body["temperature"] == 0.4
    assert seen.body["model"] == "tool-model"


def test_it_omits_tools_and_temperature_the_request_does_not_set(
    server: FakeOpenAIServer,
) -> None:
    server.push_text("ok")

    make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    [seen] = server.requests
    assert "tools" not in seen.body
    assert "parallel_tool_calls" not in seen.body
    assert "temperature" not in seen.body


def test_it_sends_messages_as_json_the_server_can_replay(
    server: FakeOpenAIServer,
) -> None:
    # A stored transcript (assistant tool calls + tool results) must go out unchanged.
    transcript = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city": "Oslo"}',
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": json.dumps({"sky": "clear"}),
        },
    ]
    server.push_text("Clear skies.")

    make_provider(server).complete(CompletionRequest(agent="a", messages=transcript))

    assert server.requests[0].body["messages"] == transcript


def test_it_returns_no_usage_when_the_server_reports_none(server: FakeOpenAIServer) -> None:
    server.push_body(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        }
    )

    completion = make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert completion.content == "hi"
    assert completion.usage is None
