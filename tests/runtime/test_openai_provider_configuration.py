"""How a provider is configured: OpenAIProvider's key, base URL, model and
timeout from the environment, and which provider build_provider makes."""

from __future__ import annotations

import pytest

from agents.llm import CompletionRequest, ProviderError, build_provider
from agents.llm.openai import OpenAIProvider
from tests.fake_openai_server import FakeOpenAIServer
from tests.runtime.openai_requests import KEY, MESSAGES

pytestmark = pytest.mark.usefixtures("no_ambient_openai_configuration")


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
