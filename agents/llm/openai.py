"""A provider for OpenAI and any OpenAI-compatible chat-completions endpoint.

Configuration comes from the environment (see :meth:`OpenAIProvider.from_env`);
every failure of the SDK becomes a :class:`ProviderError` whose message says what
happened and never contains the API key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from agents.llm.base import (
    Completion,
    CompletionRequest,
    ProviderError,
    ToolCallRequest,
    Usage,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2

# Server error texts are shown to users; an HTML error page should not flood the UI.
_MAX_SERVER_MESSAGE = 500


class OpenAIProvider:
    """Calls ``chat.completions.create`` through the official openai SDK.

    ``base_url`` selects an OpenAI-compatible server (vLLM, Ollama, LiteLLM, ...);
    ``None`` means OpenAI itself. ``timeout`` bounds each attempt, in seconds.
    ``max_retries`` is the SDK's own retry budget: it retries connection errors,
    timeouts, 408/409/429 and 5xx responses with exponential backoff (0.5 s
    doubling, at most 8 s, with jitter), or after the delay a ``retry-after-ms``
    or ``Retry-After`` header asks for (up to two minutes; a longer one is not
    retried). ``0`` turns retries off.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        if not api_key:
            raise ProviderError("openai provider: the API key is empty")
        if not model:
            raise ProviderError("openai provider: no model given")
        # The SDK raises a bare TypeError/ValueError for these; say it our way.
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ProviderError(f"openai provider: max_retries must be an integer >= 0, got {max_retries!r}")
        # Pass the default URL explicitly: given None, the SDK would read
        # OPENAI_BASE_URL from os.environ and ignore the environ we were built from.
        self.base_url = base_url or DEFAULT_BASE_URL
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._api_key = api_key
        try:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
            )
        except openai.OpenAIError as exc:
            raise ProviderError(
                f"openai provider: cannot create a client for {self._display_url}: {self._redact(str(exc))}"
            ) from exc

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] = os.environ,
        *,
        model: str | None = None,
    ) -> OpenAIProvider:
        """Build a provider from environment variables.

        ``OPENAI_API_KEY`` is required. ``OPENAI_BASE_URL`` (default: OpenAI),
        ``ZENWEB_LLM_TIMEOUT`` (seconds per attempt, default 60) and
        ``ZENWEB_LLM_MAX_RETRIES`` (retries after a failed attempt, default 2)
        are optional. The model is the ``model`` argument, else ``ZENWEB_MODEL``;
        one of them is required.
        """
        api_key = environ.get("OPENAI_API_KEY", "").strip()
        if not api_key:
            raise ProviderError(
                "OPENAI_API_KEY is not set: the openai provider needs the API key "
                "of its endpoint (OPENAI_BASE_URL, default OpenAI)"
            )
        model = model or environ.get("ZENWEB_MODEL", "").strip()
        if not model:
            raise ProviderError("no model for the openai provider: set ZENWEB_MODEL (e.g. ZENWEB_MODEL=gpt-4o-mini)")
        base_url = environ.get("OPENAI_BASE_URL", "").strip() or None
        timeout = DEFAULT_TIMEOUT
        raw_timeout = environ.get("ZENWEB_LLM_TIMEOUT", "").strip()
        if raw_timeout:
            try:
                timeout = float(raw_timeout)
            except ValueError:
                timeout = float("nan")
            if not timeout > 0:
                raise ProviderError(f"ZENWEB_LLM_TIMEOUT must be a positive number of seconds, got {raw_timeout!r}")
        max_retries = DEFAULT_MAX_RETRIES
        raw_retries = environ.get("ZENWEB_LLM_MAX_RETRIES", "").strip()
        if raw_retries:
            try:
                max_retries = int(raw_retries)
            except ValueError:
                max_retries = -1
            if max_retries < 0:
                raise ProviderError(
                    f"ZENWEB_LLM_MAX_RETRIES must be a whole number of retries, 0 or more, got {raw_retries!r}"
                )
        return cls(base_url=base_url, api_key=api_key, model=model, timeout=timeout, max_retries=max_retries)

    def complete(self, request: CompletionRequest) -> Completion:
        """Ask the model for the next turn of ``request.messages``."""
        model = request.model or self.model
        kwargs: dict[str, Any] = {"model": model, "messages": request.messages}
        # Some compatible servers reject an empty tools list or any temperature at
        # all (reasoning models), so only send what the request actually sets.
        if request.tools:
            kwargs["tools"] = request.tools
            # Let the model ask for several calls in one turn; the runner runs
            # them in the order given. Without tools the field is meaningless
            # and some servers reject it.
            kwargs["parallel_tool_calls"] = True
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        client, timeout = self._client_before(request.deadline)
        try:
            response = client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise ProviderError(self._describe(exc, model, timeout)) from exc

        choices = getattr(response, "choices", None)
        if not choices:
            raise ProviderError(f"openai provider: {self._display_url} returned no choices for model {model!r}")
        message = choices[0].message
        tool_calls: list[ToolCallRequest] = []
        for call in message.tool_calls or []:
            if call.type != "function":
                raise ProviderError(
                    f"openai provider: model {model!r} returned an unsupported "
                    f"{call.type!r} tool call; only function tools are supported"
                )
            tool_calls.append(
                ToolCallRequest(
                    id=call.id,
                    name=call.function.name,
                    arguments=call.function.arguments,
                )
            )
        usage = None
        if response.usage is not None:
            # Compatible servers sometimes leave a count out (null); count it as 0.
            usage = Usage(
                prompt_tokens=response.usage.prompt_tokens or 0,
                completion_tokens=response.usage.completion_tokens or 0,
            )
        # A refusal arrives with content None; keep its text so the transcript says why.
        content = message.content if message.content is not None else message.refusal
        return Completion(content=content, tool_calls=tool_calls, usage=usage)

    def _client_before(self, deadline: float | None) -> tuple[openai.OpenAI, float]:
        """The client, and the seconds it waits, for an answer needed by
        ``deadline``: a call never outlives the step or run that made it,
        so a stalled server does not keep a worker past its timeout."""
        if deadline is None:
            return self._client, self.timeout
        left = deadline - time.time()
        if left <= 0:
            raise ProviderError(f"openai provider: not called: the deadline passed {-left:.1f}s ago")
        if left >= self.timeout:
            return self._client, self.timeout
        # No retries either: the next attempt would start past the deadline.
        return self._client.with_options(timeout=left, max_retries=0), left

    @property
    def _display_url(self) -> str:
        """The base URL without any user:password part."""
        parts = urlsplit(self.base_url)
        if "@" not in parts.netloc:
            return self.base_url
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[redacted]")

    def _describe(self, exc: openai.OpenAIError, model: str, timeout: float) -> str:
        url = self._display_url
        # APITimeoutError subclasses APIConnectionError: test it first.
        if isinstance(exc, openai.APITimeoutError):
            message = f"request timed out after {timeout:g}s ({url})"
        elif isinstance(exc, openai.APIConnectionError):
            reason = exc.__cause__ or exc.message
            message = f"could not connect to {url}: {reason}"
        elif isinstance(exc, openai.RateLimitError):
            message = f"rate limited (429) by {url}: {_server_message(exc)}"
        elif isinstance(exc, openai.AuthenticationError):
            message = f"authentication failed (401) at {url}: {_server_message(exc)}; check OPENAI_API_KEY"
        elif isinstance(exc, openai.NotFoundError):
            message = f"HTTP 404 from {url} for model {model!r}: {_server_message(exc)}"
        elif isinstance(exc, openai.APIStatusError):
            message = f"HTTP {exc.status_code} from {url}: {_server_message(exc)}"
        elif isinstance(exc, openai.APIResponseValidationError):
            message = f"unexpected response from {url}: {exc.message}"
        else:
            message = f"{type(exc).__name__} calling {url}: {exc}"
        return self._redact(f"openai provider: {message}")


def _server_message(exc: openai.APIStatusError) -> str:
    """The human part of an error response: ``error.message`` of an OpenAI-style
    body, else the raw body text."""
    body = exc.body
    text: str | None = None
    if isinstance(body, Mapping):
        value = body.get("message")
        if isinstance(value, str) and value:
            text = value
    elif isinstance(body, str) and body.strip():
        text = body.strip()
    if text is None:
        text = "(no error message in the response)"
    if len(text) > _MAX_SERVER_MESSAGE:
        text = text[:_MAX_SERVER_MESSAGE] + "..."
    return text
