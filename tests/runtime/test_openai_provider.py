"""OpenAIProvider against the real openai SDK and a local chat-completions server."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from agents.llm import (
    CompletionRequest,
    ProviderError,
    ToolCallRequest,
    Usage,
    build_provider,
)
from agents.llm.openai import OpenAIProvider
from tests.fake_openai_server import FakeOpenAIServer

KEY = "sk-test-0123456789abcdef"

MESSAGES = [
    {"role": "system", "content": "You are a researcher."},
    {"role": "user", "content": "What is the weather in Oslo?"},
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


@pytest.fixture(autouse=True)
def _no_ambient_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK and httpx2 read these from os.environ; a developer's proxy or real
    # OpenAI settings must not change where these tests send requests.
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_CUSTOM_HEADERS",
        "ZENWEB_LLM",
        "ZENWEB_MODEL",
        "ZENWEB_LLM_TIMEOUT",
        "ZENWEB_LLM_MAX_RETRIES",
    ):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def make_provider(server: FakeOpenAIServer, *, timeout: float = 60.0, max_retries: int = 0) -> OpenAIProvider:
    # No SDK retries unless asked: each test queues exactly the responses it expects to be asked for.
    return OpenAIProvider(
        base_url=server.base_url,
        api_key=KEY,
        model="default-model",
        timeout=timeout,
        max_retries=max_retries,
    )


# Tells the SDK to retry after 10 ms instead of its 0.5 s first backoff.
RETRY_SOON = {"retry-after-ms": "10"}


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


def test_it_sends_the_key_and_base_url_from_the_environment(
    server: FakeOpenAIServer,
) -> None:
    server.push_text("hi")
    environ = {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": server.base_url,
        "ZENWEB_MODEL": "env-model",
        "ZENWEB_LLM_TIMEOUT": "3.5",
    }

    provider = OpenAIProvider.from_env(environ)
    completion = provider.complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert completion.content == "hi"
    assert provider.timeout == 3.5
    [seen] = server.requests
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["model"] == "env-model"


def test_it_prefers_the_model_argument_to_zenweb_model() -> None:
    environ = {"OPENAI_API_KEY": KEY, "ZENWEB_MODEL": "env-model"}

    provider = OpenAIProvider.from_env(environ, model="argument-model")

    assert provider.model == "argument-model"


def test_it_reports_a_server_error_with_its_message_and_without_the_key(
    server: FakeOpenAIServer,
) -> None:
    server.push_error(500, "The server had an error while processing your request.")

    with pytest.raises(ProviderError) as caught:
        make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    message = str(caught.value)
    assert "HTTP 500" in message
    assert server.base_url in message
    assert "The server had an error while processing your request." in message
    assert KEY not in message
    assert caught.value.__cause__ is not None
    assert len(server.requests) == 1


def test_it_redacts_the_key_when_the_server_echoes_it(server: FakeOpenAIServer) -> None:
    server.push_error(401, f"Incorrect API key provided: {KEY}.", error_type="invalid_request_error")

    with pytest.raises(ProviderError) as caught:
        make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    message = str(caught.value)
    assert "authentication failed (401)" in message
    assert "Incorrect API key provided: [redacted]." in message
    assert KEY not in message


def test_it_redacts_the_environments_other_secrets_when_the_server_echoes_them(server: FakeOpenAIServer) -> None:
    # A proxy in front of the model may echo what it was sent, a database URL included.
    db_password = "pg-canary-8f2e1d"
    environ = {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": server.base_url,
        "ZENWEB_LLM_MAX_RETRIES": "0",
        "DATABASE_PASSWORD": db_password,
    }
    server.push_error(500, f"upstream said: password={db_password}")

    with pytest.raises(ProviderError) as caught:
        OpenAIProvider.from_env(environ, model="m").complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "upstream said: password=[redacted]" in str(caught.value)
    assert db_password not in str(caught.value)


def test_it_reports_rate_limiting(server: FakeOpenAIServer) -> None:
    server.push_error(429, "Rate limit reached for requests.", error_type="requests")

    with pytest.raises(ProviderError) as caught:
        make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "rate limited (429)" in str(caught.value)
    assert "Rate limit reached for requests." in str(caught.value)


def test_it_reports_a_timeout(server: FakeOpenAIServer) -> None:
    server.push_text("too late", delay=3.0)

    with pytest.raises(ProviderError) as caught:
        make_provider(server, timeout=0.5).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "timed out after 0.5s" in str(caught.value)


def test_it_stops_waiting_at_the_requests_deadline(server: FakeOpenAIServer) -> None:
    server.push_text("too late", delay=3.0)
    request = CompletionRequest(agent="a", messages=MESSAGES, deadline=time.time() + 0.5)

    with pytest.raises(ProviderError) as caught:
        make_provider(server, timeout=60, max_retries=2).complete(request)

    assert re.search(r"timed out after 0\.[2-5]\d*s", str(caught.value))
    assert len(server.requests) == 1  # no retry past the deadline


def test_it_does_not_call_a_model_past_the_requests_deadline(server: FakeOpenAIServer) -> None:
    request = CompletionRequest(agent="a", messages=MESSAGES, deadline=time.time() - 2)

    with pytest.raises(ProviderError, match=r"not called: the deadline passed 2\.\ds ago"):
        make_provider(server).complete(request)

    assert server.requests == []


def test_it_reports_a_server_that_cannot_be_reached() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, model="m", max_retries=0)

    with pytest.raises(ProviderError) as caught:
        provider.complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert f"could not connect to http://127.0.0.1:{port}/v1" in str(caught.value)


def test_it_reports_a_response_without_choices(server: FakeOpenAIServer) -> None:
    server.push_body(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [],
        }
    )

    with pytest.raises(ProviderError) as caught:
        make_provider(server).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "returned no choices" in str(caught.value)


def test_it_requires_openai_api_key() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider.from_env({"ZENWEB_MODEL": "m"})

    assert "OPENAI_API_KEY is not set" in str(caught.value)


def test_it_requires_a_model() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider.from_env({"OPENAI_API_KEY": KEY})

    assert "ZENWEB_MODEL" in str(caught.value)
    assert KEY not in str(caught.value)


def test_it_rejects_a_timeout_that_is_not_a_number() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider.from_env({"OPENAI_API_KEY": KEY, "ZENWEB_MODEL": "m", "ZENWEB_LLM_TIMEOUT": "soon"})

    assert "ZENWEB_LLM_TIMEOUT" in str(caught.value)


def test_it_builds_openai_only_when_asked() -> None:
    environ = {"OPENAI_API_KEY": KEY, "ZENWEB_MODEL": "m"}

    by_name = build_provider("openai", model="named-model", script=None, environ=environ)
    by_env = build_provider(None, model=None, script=None, environ={**environ, "ZENWEB_LLM": "openai"})

    assert isinstance(by_name, OpenAIProvider)
    assert by_name.model == "named-model"
    assert isinstance(by_env, OpenAIProvider)
    assert by_env.name == "openai"


def test_it_builds_the_scripted_provider_otherwise() -> None:
    pytest.importorskip("agents.llm.scripted")
    environ = {"OPENAI_API_KEY": KEY, "ZENWEB_MODEL": "m"}

    assert build_provider(None, model=None, script=[], environ=environ).name == "scripted"
    assert build_provider(None, model=None, script=None, environ={}).name == "scripted"
    assert (
        build_provider(
            "scripted",
            model=None,
            script=None,
            environ={**environ, "ZENWEB_LLM": "openai"},
        ).name
        == "scripted"
    )


def test_it_rejects_unknown_provider_names() -> None:
    with pytest.raises(ProviderError) as by_name:
        build_provider("anthropic", model=None, script=None, environ={})
    with pytest.raises(ProviderError) as by_env:
        build_provider(None, model=None, script=None, environ={"ZENWEB_LLM": "opneai"})

    assert "openai, scripted" in str(by_name.value)
    assert "ZENWEB_LLM 'opneai'" in str(by_env.value)


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


def test_it_retries_a_rate_limit_after_the_delay_the_server_asks_for(
    server: FakeOpenAIServer,
) -> None:
    server.push_error(429, "Rate limit reached for requests.", error_type="requests", headers=RETRY_SOON)
    server.push_text("Sunny after all.", prompt_tokens=12, completion_tokens=3)

    started = time.monotonic()
    completion = make_provider(server, max_retries=2).complete(CompletionRequest(agent="a", messages=MESSAGES))
    elapsed = time.monotonic() - started

    assert completion.content == "Sunny after all."
    assert completion.usage == Usage(prompt_tokens=12, completion_tokens=3)
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    # The SDK's own backoff would have waited at least 0.375 s.
    assert elapsed < 0.35


def test_it_retries_a_server_error(server: FakeOpenAIServer) -> None:
    server.push_error(500, "The server had an error while processing your request.", headers=RETRY_SOON)
    server.push_text("Recovered.")

    completion = make_provider(server, max_retries=2).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert completion.content == "Recovered."
    assert len(server.requests) == 2


def test_it_gives_up_when_the_retries_are_spent(server: FakeOpenAIServer) -> None:
    for _ in range(3):
        server.push_error(429, "Rate limit reached for requests.", error_type="requests", headers=RETRY_SOON)
    server.push_text("never asked for")

    with pytest.raises(ProviderError) as caught:
        make_provider(server, max_retries=2).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "rate limited (429)" in str(caught.value)
    assert len(server.requests) == 3


def test_it_does_not_retry_a_bad_request(server: FakeOpenAIServer) -> None:
    server.push_error(400, "Invalid 'messages'.", error_type="invalid_request_error", headers=RETRY_SOON)
    server.push_text("never asked for")

    with pytest.raises(ProviderError) as caught:
        make_provider(server, max_retries=2).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "HTTP 400" in str(caught.value)
    assert "Invalid 'messages'." in str(caught.value)
    assert len(server.requests) == 1


def test_it_reads_the_retry_budget_from_the_environment(server: FakeOpenAIServer) -> None:
    environ = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url, "ZENWEB_MODEL": "m"}
    server.push_error(429, "Rate limit reached for requests.", error_type="requests", headers=RETRY_SOON)

    default = OpenAIProvider.from_env(environ)
    provider = OpenAIProvider.from_env({**environ, "ZENWEB_LLM_MAX_RETRIES": " 0 "})
    with pytest.raises(ProviderError) as caught:
        provider.complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert default.max_retries == 2
    assert provider.max_retries == 0
    assert "rate limited (429)" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("raw", ["two", "-1", "1.5"])
def test_it_rejects_a_retry_budget_that_is_not_a_whole_number(raw: str) -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider.from_env({"OPENAI_API_KEY": KEY, "ZENWEB_MODEL": "m", "ZENWEB_LLM_MAX_RETRIES": raw})

    assert "ZENWEB_LLM_MAX_RETRIES" in str(caught.value)
    assert repr(raw) in str(caught.value)
    assert KEY not in str(caught.value)


def test_it_rejects_a_negative_max_retries() -> None:
    with pytest.raises(ProviderError) as caught:
        OpenAIProvider(base_url=None, api_key=KEY, model="m", max_retries=-1)

    assert "max_retries" in str(caught.value)


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
