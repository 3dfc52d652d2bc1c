"""OpenAIProvider streams its answers and reports its retries: against the
real openai SDK and the local chat-completions server."""

from __future__ import annotations

import json
import socket
import time

import pytest

from agents.llm import CompletionRequest, PartialOutput, ProviderError, RetryNotice, ToolCallRequest, Usage
from agents.llm.openai import OpenAIProvider
from tests.fake_openai_server import Delivery, FakeOpenAIServer

KEY = "sk-test-streaming-0123456789"
MESSAGES = [{"role": "user", "content": "Tell me about tides."}]
REQUEST = CompletionRequest(agent="a", messages=MESSAGES)
RETRY_SOON = {"retry-after-ms": "10"}


def make_provider(server: FakeOpenAIServer, *, max_retries: int = 2) -> OpenAIProvider:
    return OpenAIProvider(base_url=server.base_url, api_key=KEY, model="m", max_retries=max_retries)


def test_it_asks_for_a_stream_with_usage_and_returns_the_whole_answer(server: FakeOpenAIServer) -> None:
    answer = "High tide is at six in the morning, low tide at noon."
    server.push_text(answer, prompt_tokens=17, completion_tokens=12)

    completion = make_provider(server).complete(REQUEST)

    assert completion.content == answer
    assert completion.usage == Usage(prompt_tokens=17, completion_tokens=12)
    [seen] = server.requests
    assert seen.body["stream"] is True
    assert seen.body["stream_options"] == {"include_usage": True}
    # The answer really came in pieces.
    assert len(server.streamed) > 5


def test_it_assembles_tool_calls_whose_arguments_arrive_in_fragments(server: FakeOpenAIServer) -> None:
    first = json.dumps({"city": "Oslo", "units": "metric"})
    second = json.dumps({"query": "tides in Bergen"})
    server.push_tool_calls([("call_1", "get_weather", first), ("call_2", "search", second)])
    seen: list[PartialOutput] = []

    completion = make_provider(server).complete(REQUEST, on_partial=seen.append)

    assert completion.tool_calls == [
        ToolCallRequest(id="call_1", name="get_weather", arguments=first),
        ToolCallRequest(id="call_2", name="search", arguments=second),
    ]
    assert completion.content is None
    # The partials carried the arguments as far as they had arrived.
    assert seen and all(first.startswith(p.tool_calls[0].arguments) for p in seen)


def test_it_reports_the_first_token_at_once_then_at_most_every_100_ms(server: FakeOpenAIServer) -> None:
    answer = "abcd" * 30  # 30 chunks of 4 characters, 20 ms apart: 0.6 s
    server.push_text(answer, delivery=Delivery(chunk_delay=0.02))
    seen: list[tuple[float, str]] = []

    completion = make_provider(server).complete(REQUEST, on_partial=lambda p: seen.append((time.time(), p.text)))

    assert completion.content == answer
    first_sent, first_text = server.streamed[0]
    # The first token alone: not held back for the throttle's 100 ms.
    assert seen[0][1] == first_text == "abcd"
    assert seen[0][0] - first_sent < 0.5
    gaps = [later - earlier for (earlier, _), (later, _) in zip(seen, seen[1:], strict=False)]
    assert gaps and min(gaps) >= 0.099
    assert 3 <= len(seen) <= 8  # not one per chunk
    assert all(answer.startswith(text) for _, text in seen)


def test_it_reports_a_rate_limit_retry_with_status_message_attempt_and_wait(server: FakeOpenAIServer) -> None:
    server.push_error(429, f"Rate limit reached for key {KEY}.", error_type="requests", headers=RETRY_SOON)
    server.push_text("Sunny after all.")
    retries: list[RetryNotice] = []

    completion = make_provider(server).complete(REQUEST, on_retry=retries.append)

    assert completion.content == "Sunny after all."
    [retry] = retries
    assert (retry.status, retry.attempt, retry.wait) == (429, 1, 0.01)
    assert "Rate limit reached for key [redacted]." in retry.message
    assert KEY not in retry.message
    assert len(server.requests) == 2


def test_it_names_the_status_of_a_server_error_that_persists(server: FakeOpenAIServer) -> None:
    for _ in range(3):
        server.push_error(500, "upstream exploded", headers=RETRY_SOON)
    retries: list[RetryNotice] = []

    with pytest.raises(ProviderError) as caught:
        make_provider(server).complete(REQUEST, on_retry=retries.append)

    assert f"HTTP 500 from the model endpoint {server.base_url}: upstream exploded" in str(caught.value)
    assert caught.value.status == 500
    assert [(r.status, r.attempt) for r in retries] == [(500, 1), (500, 2)]
    assert len(server.requests) == 3


def test_it_reports_a_connection_error_retry_without_a_status() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, model="m", max_retries=1)
    retries: list[RetryNotice] = []

    with pytest.raises(ProviderError, match="could not connect"):
        provider.complete(REQUEST, on_retry=retries.append)

    [retry] = retries
    assert retry.status is None and retry.attempt == 1
    assert "could not connect" in retry.message
    assert 0.3 <= retry.wait <= 0.5  # the SDK's first backoff, with jitter


def test_it_does_not_retry_past_the_requests_deadline(server: FakeOpenAIServer) -> None:
    server.push_error(503, "busy", headers={"retry-after": "5"})
    retries: list[RetryNotice] = []
    request = CompletionRequest(agent="a", messages=MESSAGES, deadline=time.time() + 2)

    with pytest.raises(ProviderError, match="HTTP 503"):
        make_provider(server).complete(request, on_retry=retries.append)

    assert retries == []
    assert len(server.requests) == 1
