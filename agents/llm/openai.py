"""A provider for OpenAI and any OpenAI-compatible chat-completions endpoint.

Configuration comes from the environment (see :meth:`OpenAIProvider.from_env`);
every failure of the SDK becomes a :class:`ProviderError` whose message says what
happened and never contains the API key.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from agents.llm.base import (
    Completion,
    CompletionRequest,
    PartialCallback,
    ProviderError,
    RetryCallback,
    RetryNotice,
)
from agents.llm.openai_stream import StreamCut, StreamedAnswer, read_stream
from agents.redaction import Redactor, secret_values

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2

# Server error texts are shown to users; an HTML error page should not flood the UI.
_MAX_SERVER_MESSAGE = 500

# Retries: the SDK's backoff, and the longest Retry-After we wait for.
INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 8.0
MAX_ASKED_DELAY = 60.0


class OpenAIProvider:
    """Calls ``chat.completions.create`` through the official openai SDK.

    ``base_url`` selects an OpenAI-compatible server (vLLM, Ollama, LiteLLM, ...);
    ``None`` means OpenAI itself. ``timeout`` bounds each attempt, in seconds.
    ``max_retries`` is the retry budget, spent by the SDK's rules but counted
    here: connection errors, timeouts, 408/409/429 and 5xx responses are
    retried with exponential backoff (0.5 s doubling, at most 8 s, with
    jitter), or after the delay a ``retry-after-ms`` or ``Retry-After`` header
    asks for (up to a minute). ``0`` turns retries off.
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
        secrets: Iterable[str] = (),
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
        # What the endpoint says goes into events and errors: the key, and
        # any other secret the environment holds, never do (agents.redaction).
        self._api_key = api_key
        self._redactor = Redactor(secrets)
        try:
            # The SDK retries nothing: complete() does, so that each retry
            # is reported (a provider event on the run), not silent.
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=api_key,
                timeout=timeout,
                max_retries=0,
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
        return cls(
            base_url=base_url,
            api_key=api_key,
            model=model,
            timeout=timeout,
            max_retries=max_retries,
            secrets=secret_values(environ),
        )

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        """Ask the model for the next turn of ``request.messages``, streamed:
        ``on_partial`` sees the answer so far (the first token at once, then
        at most every openai_stream.THROTTLE_SECONDS), ``on_retry`` each retry before its wait."""
        model = request.model or self.model
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": request.messages,
            "stream": True,
            # Without it a streamed answer carries no token counts.
            "stream_options": {"include_usage": True},
        }
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
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        budget = self.max_retries if request.max_retries is None else request.max_retries
        attempt = 0
        while True:
            attempt += 1
            client, timeout = self._client_before(request.deadline)
            try:
                return self._stream(client, kwargs, model, timeout, request.deadline, on_partial)
            except (openai.OpenAIError, StreamCut) as exc:
                message = self._describe(exc, model, timeout)
                status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
                # What the server asks to wait (retry-after-ms, Retry-After).
                asked = _asked_delay(exc.response.headers) if isinstance(exc, openai.APIStatusError) else None
                # An attempt cut short by the deadline is not tried again:
                # the next would start past it.
                cut = timeout < self.timeout
                wait = None if cut or attempt > budget else self._retry_wait(exc, attempt, request.deadline, asked)
                if wait is None:
                    if asked is not None and asked > MAX_ASKED_DELAY and attempt <= budget:
                        message += f" (it asks to wait {asked:g} s, longer than a turn waits: {MAX_ASKED_DELAY:g} s)"
                    raise ProviderError(message, status=status) from exc
                if on_retry is not None:
                    on_retry(RetryNotice(status=status, message=message, attempt=attempt, wait=round(wait, 3)))
                time.sleep(wait)

    def _stream(
        self,
        client: openai.OpenAI,
        kwargs: dict[str, Any],
        model: str,
        timeout: float,
        deadline: float | None,
        on_partial: PartialCallback | None,
    ) -> Completion:
        """One attempt: read the streamed chunks into a Completion
        (agents/llm/openai_stream.py says what an unfinished one raises)."""
        answer = StreamedAnswer(model)
        timed_out = f"openai provider: request timed out after {timeout:g}s ({self._display_url})"
        with client.chat.completions.create(**kwargs) as stream:
            read_stream(stream, answer, deadline=deadline, on_partial=on_partial, timed_out=timed_out)
        return answer.completion(self._display_url)

    def _retry_wait(
        self, exc: openai.OpenAIError | StreamCut, attempt: int, deadline: float | None, asked: float | None
    ) -> float | None:
        """Seconds to wait before trying again after ``exc`` on attempt
        ``attempt``, or None if it is not tried again. The rules are the
        SDK's own (it retries nothing here, so that each retry can be
        reported): connection errors (a stream cut off too), timeouts,
        408/409/429 and 5xx, after the delay the server ``asked`` for; else 0.5 s
        doubling to at most 8 s with jitter; never past the deadline. A
        server that asks for more than a minute is not tried again: the
        retries would all land inside its wait."""
        if attempt > self.max_retries:
            return None
        if isinstance(exc, openai.APIStatusError):
            should = exc.response.headers.get("x-should-retry")
            if should == "false":
                return None
            if should != "true" and exc.status_code not in (408, 409, 429) and exc.status_code < 500:
                return None
            if asked is not None and asked > MAX_ASKED_DELAY:
                return None
        elif not isinstance(exc, openai.APIConnectionError | StreamCut):
            return None
        if asked is not None and asked >= 0:
            wait = asked
        else:
            wait = min(INITIAL_BACKOFF * 2 ** (attempt - 1), MAX_BACKOFF) * (1 - 0.25 * random.random())
        if deadline is not None and time.time() + wait >= deadline:
            return None
        return wait

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
        return self._client.with_options(timeout=left), left

    @property
    def _display_url(self) -> str:
        """The base URL without any user:password part."""
        parts = urlsplit(self.base_url)
        if "@" not in parts.netloc:
            return self.base_url
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))

    def _redact(self, text: str) -> str:
        return self._redactor.text(text.replace(self._api_key, "[redacted]"))

    def _describe(self, exc: openai.OpenAIError | StreamCut, model: str, timeout: float) -> str:
        url = self._display_url
        # APITimeoutError subclasses APIConnectionError: test it first.
        if isinstance(exc, StreamCut):
            message = f"{exc} ({url})"
        elif isinstance(exc, openai.APITimeoutError):
            message = f"request timed out after {timeout:g}s ({url})"
        elif isinstance(exc, openai.APIConnectionError):
            reason = exc.__cause__ or exc.message
            message = f"could not connect to {url}: {reason}"
        elif isinstance(exc, openai.RateLimitError):
            message = f"rate limited (429) by {url}: {_server_message(exc)}"
        elif isinstance(exc, openai.AuthenticationError):
            message = f"authentication failed (401) at {url}: {_server_message(exc)}; check OPENAI_API_KEY"
        elif isinstance(exc, openai.NotFoundError):
            message = f"HTTP 404 from the model endpoint {url} for model {model!r}: {_server_message(exc)}"
        elif isinstance(exc, openai.APIStatusError):
            message = f"HTTP {exc.status_code} from the model endpoint {url}: {_server_message(exc)}"
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


def _asked_delay(headers: Mapping[str, str]) -> float | None:
    """The seconds a ``retry-after-ms`` or ``Retry-After`` header asks to wait."""
    try:
        if (value := headers.get("retry-after-ms")) is not None:
            return float(value) / 1000
        if (value := headers.get("retry-after")) is not None:
            try:
                return float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                return when.timestamp() - time.time()
    except (TypeError, ValueError):
        return None
    return None
