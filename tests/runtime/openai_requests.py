"""What the OpenAIProvider tests send: a key, messages and a tool, and a
provider pointed at the fake chat-completions server."""

from __future__ import annotations

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
