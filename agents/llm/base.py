"""The provider protocol: how the runtime asks a model for the next turn.

Providers speak the chat-completions shape (a list of role/content dicts and
function tools), because every OpenAI-compatible endpoint does and because the
transcript we store is replayable by any of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


class ProviderError(Exception):
    """The model could not produce a turn. The message is safe to show a user:
    it never contains credentials. ``status`` is the endpoint's HTTP status
    when it answered with an error, else None."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for. ``arguments`` is the raw JSON text the
    model produced: it is untrusted and parsed by the tool registry."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class CompletionRequest:
    agent: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    # Values the scripted provider substitutes into its script ($query, $inbox, ...).
    # Real providers ignore them: everything a real model sees is in ``messages``.
    variables: dict[str, str] = field(default_factory=dict)
    # Unix time by which the answer is needed (the step's or the run's
    # timeout). A provider that can stop waiting then does, with a
    # ProviderError; one that cannot (scripted) answers late.
    deadline: float | None = None
    # Retries after a transient provider error for this call (zenflow's
    # maxRetries); None: the provider's own budget.
    max_retries: int | None = None


@dataclass(frozen=True)
class CallFacts:
    """How a model call went, as its caller measured it
    (agents/metered_provider.py): the model asked, the call's latency with
    its retries, and how many retries it took."""

    model: str
    latency_ms: int
    retries: int


@dataclass(frozen=True)
class Completion:
    content: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    usage: Usage | None = None
    call: CallFacts | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the transcript."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class PartialToolCall:
    """A tool call as far as it has arrived: ``arguments`` is a fragment of
    JSON until the answer ends."""

    name: str
    arguments: str


@dataclass(frozen=True)
class PartialOutput:
    """An answer while it is generated: the text so far and the tool calls so
    far. Untrusted model text, like the final answer."""

    text: str
    tool_calls: tuple[PartialToolCall, ...] = ()


@dataclass(frozen=True)
class RetryNotice:
    """One failed attempt that will be tried again after ``wait`` seconds.
    ``status`` is the HTTP status, None for a timeout or a connection error;
    ``message`` is safe to store (credentials redacted)."""

    status: int | None
    message: str
    attempt: int
    wait: float


PartialCallback = Callable[[PartialOutput], None]
RetryCallback = Callable[[RetryNotice], None]


class Provider(Protocol):
    name: str

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        """The model's next turn. A provider that streams calls ``on_partial``
        with the answer so far as it arrives (throttled); one that retries
        calls ``on_retry`` before each retry."""
        ...


# runs/actions/model_calls.py imports RetryNotice as ProviderRetry: this alias goes when it imports it by its name.
ProviderRetry = RetryNotice
