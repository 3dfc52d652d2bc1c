"""Model providers: the protocol, the real OpenAI-compatible one and the scripted one.

Use :func:`build_provider` to pick one from a name or the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, get_args

from agents.llm.base import (
    Completion,
    CompletionRequest,
    PartialCallback,
    PartialOutput,
    PartialToolCall,
    Provider,
    ProviderError,
    ProviderRetry,
    RetryCallback,
    RetryNotice,
    ToolCallRequest,
    Usage,
)

if TYPE_CHECKING:
    from agents.llm.openai import OpenAIProvider

__all__ = [
    "PROVIDER_NAMES",
    "Completion",
    "CompletionRequest",
    "OpenAIProvider",
    "PartialCallback",
    "PartialOutput",
    "PartialToolCall",
    "Provider",
    "ProviderError",
    "ProviderName",
    "RetryNotice",
    "ProviderRetry",
    "RetryCallback",
    "ToolCallRequest",
    "Usage",
    "build_provider",
]

ProviderName = Literal["openai", "scripted"]
PROVIDER_NAMES: tuple[str, ...] = get_args(ProviderName)


def __getattr__(name: str) -> Any:
    # Importing the openai SDK takes over half a second; code that only needs the
    # protocol or the scripted model should not pay for it.
    if name == "OpenAIProvider":
        from agents.llm.openai import OpenAIProvider

        return OpenAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_provider(
    provider: str | None,
    *,
    model: str | None = None,
    script: list[Any] | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Provider:
    """Return the provider named ``provider``, or the one ``ZENWEB_LLM`` names.

    ``"openai"`` is configured from ``environ`` (see ``OpenAIProvider.from_env``),
    with ``model`` overriding ``ZENWEB_MODEL``. ``"scripted"`` plays ``script``.
    With no name and no ``ZENWEB_LLM`` the scripted model is used, so nothing
    reaches a network unless someone asks for it.
    """
    name = provider if provider is not None else environ.get("ZENWEB_LLM", "")
    name = name.strip().lower() or "scripted"
    if name == "openai":
        from agents.llm.openai import OpenAIProvider

        return OpenAIProvider.from_env(environ, model=model)
    if name == "scripted":
        from agents.llm.scripted import ScriptedProvider

        return ScriptedProvider(script)
    source = "provider" if provider is not None else "ZENWEB_LLM"
    raise ProviderError(f"unknown {source} {name!r}: expected one of {', '.join(PROVIDER_NAMES)}")
