"""OpenAIProvider's retries against a local chat-completions server: after
the delay asked for, until the budget is spent, never for a bad request, and
the budget read from the environment."""

from __future__ import annotations

import time

import pytest

from agents.llm import CompletionRequest, ProviderError, Usage
from agents.llm.openai import OpenAIProvider
from tests.fake_openai_server import FakeOpenAIServer
from tests.runtime.openai_requests import KEY, MESSAGES, RETRY_SOON, make_provider

pytestmark = pytest.mark.usefixtures("no_ambient_openai_configuration")


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
