"""One streamed chat-completions answer, read chunk by chunk into a Completion.

What an answer that did not finish looks like is decided here: its last
choice names why it stopped (``finish_reason``). ``length`` (the model's
output token limit) and ``content_filter`` are not answers, and say so; a
stream that ends, or is cut, before any chunk gave a reason is ``StreamCut``,
which the provider tries again like a lost connection. Compatible servers
that stream tool calls without an ``index`` (Ollama, Gemini's endpoint) get
one call per new call id instead of one call made of all of them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import openai

from agents.llm.base import (
    Completion,
    PartialCallback,
    PartialOutput,
    PartialToolCall,
    ProviderError,
    ToolCallRequest,
    Usage,
)

# A partial answer goes out with its first token, then at most this often:
# a page redrawn per token would cost more than it shows.
THROTTLE_SECONDS = 0.1
# Why a model stops that is no finished answer, and what to tell the user.
UNFINISHED = {
    "length": "stopped at its output token limit (finish_reason length): the answer is cut off; "
    "raise the model's output limit or ask for less at a time",
    "content_filter": "stopped by the endpoint's content filter (finish_reason content_filter)",
}


class StreamCut(Exception):
    """The stream ended, or was cut, before the answer finished: tried again
    like a lost connection."""


class StreamedAnswer:
    """The chunks of one streamed answer so far."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.saw_choices = False

    def add(self, chunk: Any) -> bool:
        """Take one chunk; whether the answer so far changed."""
        changed = False
        if chunk.usage is not None:
            # Compatible servers sometimes leave a count out (null); count it as 0.
            self.usage = Usage(
                prompt_tokens=chunk.usage.prompt_tokens or 0,
                completion_tokens=chunk.usage.completion_tokens or 0,
            )
        if not chunk.choices:
            return changed
        self.saw_choices = True
        choice = chunk.choices[0]
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return changed
        if delta.content:
            self.text.append(delta.content)
            changed = True
        if getattr(delta, "refusal", None):
            self.refusal.append(delta.refusal)
        for fragment in delta.tool_calls or []:
            self._add_call(fragment)
            changed = True
        return changed

    def _add_call(self, fragment: Any) -> None:
        if fragment.type not in (None, "function"):
            raise ProviderError(
                f"openai provider: model {self.model!r} returned an unsupported "
                f"{fragment.type!r} tool call; only function tools are supported"
            )
        index = fragment.index
        if index is None:
            # No index: a new id starts the next call, anything else goes on the last.
            last = self.calls.get(len(self.calls) - 1)
            new = last is None or (fragment.id and fragment.id != last["id"])
            index = len(self.calls) if new else len(self.calls) - 1
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if fragment.id:
            call["id"] = fragment.id
        if fragment.function is not None:
            if fragment.function.name:
                call["name"] += fragment.function.name
            if fragment.function.arguments:
                call["arguments"].append(fragment.function.arguments)

    def partial(self) -> PartialOutput:
        return PartialOutput(
            text="".join(self.text),
            tool_calls=tuple(
                PartialToolCall(name=call["name"], arguments="".join(call["arguments"]))
                for _, call in sorted(self.calls.items())
            ),
        )

    def completion(self, where: str) -> Completion:
        """The finished answer; a ProviderError or StreamCut for one that did not finish."""
        if not self.saw_choices:
            raise ProviderError(f"openai provider: {where} returned no choices for model {self.model!r}")
        if self.finish_reason in UNFINISHED:
            raise ProviderError(f"openai provider: model {self.model!r} {UNFINISHED[self.finish_reason]}")
        if self.finish_reason is None:
            raise StreamCut(f"the answer's stream ended unfinished (no finish_reason) after {self.size()}")
        # Some compatible servers stream a call without an id; the transcript
        # needs one to pair the call with its result.
        tool_calls = [
            ToolCallRequest(id=call["id"] or f"call_{index}", name=call["name"], arguments="".join(call["arguments"]))
            for index, call in sorted(self.calls.items())
        ]
        # A refusal arrives with no content; keep its text so the transcript says why.
        content = "".join(self.text) if self.text else ("".join(self.refusal) if self.refusal else None)
        return Completion(content=content, tool_calls=tool_calls, usage=self.usage)

    def size(self) -> str:
        return f"{sum(map(len, self.text))} characters and {len(self.calls)} tool calls"


def read_stream(
    stream: Iterable[Any],
    answer: StreamedAnswer,
    *,
    deadline: float | None,
    on_partial: PartialCallback | None,
    timed_out: str,
) -> None:
    """Read ``stream`` into ``answer``: partial answers to ``on_partial``, a
    ProviderError (``timed_out``) past ``deadline``, StreamCut for a
    connection lost once the answer had begun."""
    sent_at: float | None = None
    changed = False
    try:
        for chunk in stream:
            changed = answer.add(chunk) or changed
            # A trickling answer must not outlive the step that waits for it:
            # the client's timeout bounds each read, not the whole stream.
            if deadline is not None and time.time() > deadline:
                raise ProviderError(timed_out)
            if on_partial is not None and changed:
                now = time.monotonic()
                if sent_at is None or now - sent_at >= THROTTLE_SECONDS:
                    sent_at, changed = now, False
                    on_partial(answer.partial())
    except openai.APIConnectionError as exc:
        if isinstance(exc, openai.APITimeoutError) or not answer.saw_choices:
            raise
        reason = exc.__cause__ or exc.message
        raise StreamCut(f"the answer's stream was cut off after {answer.size()}: {reason}") from exc
