"""OpenAIProvider's errors against a local chat-completions server: server
errors, rate limits, timeouts and deadlines, an unreachable server, an
empty answer, and no secret in any message."""

from __future__ import annotations

import re
import socket
import time

import pytest

from agents.llm import CompletionRequest, ProviderError
from agents.llm.openai import OpenAIProvider
from tests.fake_openai_server import Delivery, FakeOpenAIServer
from tests.runtime.openai_requests import KEY, MESSAGES, make_provider

pytestmark = pytest.mark.usefixtures("no_ambient_openai_configuration")


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
    server.push_text("too late", delivery=Delivery(delay=3.0))

    with pytest.raises(ProviderError) as caught:
        make_provider(server, timeout=0.5).complete(CompletionRequest(agent="a", messages=MESSAGES))

    assert "timed out after 0.5s" in str(caught.value)


def test_it_stops_waiting_at_the_requests_deadline(server: FakeOpenAIServer) -> None:
    server.push_text("too late", delivery=Delivery(delay=3.0))
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
