"""A run's OpenTelemetry spans, with the GenAI semantic conventions' names:
``invoke_workflow`` (the run), ``invoke_agent`` (a step's turn, the
coordinator's wake), ``chat`` (a model call), ``execute_tool`` (a tool call);
approvals and waits are events on the span they happen in.

Only the OpenTelemetry API here: with no SDK set up (zenweb/telemetry.py
sets one up when OTEL_* variables ask for it) every span is the API's
non-recording one and nothing is exported.

A run is one trace across processes. Its context is made when the run is
made (``new_run_context``: the trace of the request that asked for it, and a
span id kept for the run's own ``invoke_workflow`` span) and stored with the
run; every later span of the run is parented on it (``run_span``), and the
``invoke_workflow`` span itself is written when the run ends
(``end_workflow``), with that kept id and the run's start and end times.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from agents.llm.base import Completion, CompletionRequest, PartialCallback, Provider, ProviderError, RetryCallback
from agents.redaction import Redactor

TRACER = trace.get_tracer("zenweb")
# The conventions' setting: prompts and answers go into spans only when it is "true".
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# What a captured prompt or answer may hold (characters): model text is untrusted and unbounded.
CONTENT_CHARS = 16_000


def capture_content(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def tracing() -> bool:
    """Whether an SDK is set up in this process (else every span is a no-op)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


# --- a run's trace context -------------------------------------------------


def new_run_context() -> dict[str, str] | None:
    """What a new run stores of its trace: the trace of the span current
    here (the API request that asked for the run), or a new trace; the span
    id its ``invoke_workflow`` span will have, and the span it hangs under.
    None when this process does not trace."""
    if not tracing():
        return None
    current = trace.get_current_span().get_span_context()
    trace_id = current.trace_id if current.is_valid else random.getrandbits(128) or 1
    flags = current.trace_flags if current.is_valid else TraceFlags(TraceFlags.SAMPLED)
    stored = {"trace_id": f"{trace_id:032x}", "span_id": f"{random.getrandbits(64) or 1:016x}", "flags": f"{flags:02x}"}
    if current.is_valid:
        stored["parent_id"] = f"{current.span_id:016x}"
    return stored


def trace_id(stored: Mapping[str, str] | None) -> str:
    """The run's trace id as hex ("" when it has none)."""
    return stored.get("trace_id", "") if stored else ""


def _context(stored: Mapping[str, str], span_key: str) -> Any:
    """A context whose current span is the stored span ``span_key`` of the run."""
    span = SpanContext(
        trace_id=int(stored["trace_id"], 16),
        span_id=int(stored[span_key], 16),
        is_remote=True,
        trace_flags=TraceFlags(int(stored.get("flags", "01"), 16)),
    )
    return trace.set_span_in_context(NonRecordingSpan(span))


@contextlib.contextmanager
def in_run(stored: Mapping[str, str] | None) -> Iterator[None]:
    """Inside the block, what starts a span (a task's publish) starts it in the run's trace."""
    if not stored:
        yield
        return
    token = otel_context.attach(_context(stored, "span_id"))
    try:
        yield
    finally:
        otel_context.detach(token)


@contextlib.contextmanager
def run_span(stored: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any]) -> Iterator[Span]:
    """A span of the run, current inside the block: under the run's
    ``invoke_workflow`` span when the run has a stored context, else under
    whatever is current."""
    context = _context(stored, "span_id") if stored else None
    with TRACER.start_as_current_span(name, context=context, kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


def agent_span(stored: Mapping[str, str] | None, run_id: int, agent: str, step_id: str) -> Any:
    """The ``invoke_agent`` span of one step turn or coordinator wake."""
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.conversation.id": f"{run_id}/{step_id}",
        "zenweb.run.id": run_id,
        "zenweb.step.id": step_id,
    }
    return run_span(stored, f"invoke_agent {agent}", attributes)


def run_event(stored: Mapping[str, str] | None, name: str, attributes: Mapping[str, Any]) -> None:
    """An event of the run that happens outside its turns (a person's
    decision on an approval): on a span of its own in the run's trace."""
    if not stored or not tracing():
        return
    with run_span(stored, f"zenweb.{name}", attributes) as span:
        span.add_event(name, dict(attributes))


# The ids the next span started in this context takes (end_workflow's): trace id, span id.
_NEXT_IDS: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("zenweb_next_ids", default=None)


class RunSpanIds(RandomIdGenerator):
    """Random ids, except for a run's ``invoke_workflow`` span, which takes
    the ids its run stored when it was made: the spans of its turns, made in
    other processes long before it ends, already name it as their parent."""

    def generate_span_id(self) -> int:
        kept = _NEXT_IDS.get()
        return kept[1] if kept is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        # Asked for only by a span without a parent: a run made outside any trace.
        kept = _NEXT_IDS.get()
        return kept[0] if kept is not None else super().generate_trace_id()


def end_workflow(stored: Mapping[str, str] | None, run_id: int, workflow: str, status: str, started: datetime) -> None:
    """Write the run's ``invoke_workflow`` span, from ``started`` to now:
    under the span that asked for the run, or the root of its own trace."""
    if not stored or not tracing():
        return
    parent = _context(stored, "parent_id") if "parent_id" in stored else Context()
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": workflow,
        "zenweb.run.id": run_id,
        "zenweb.run.status": status,
    }
    token = _NEXT_IDS.set((int(stored["trace_id"], 16), int(stored["span_id"], 16)))
    try:
        name = f"invoke_workflow {workflow}"
        span = TRACER.start_span(name, context=parent, attributes=attributes, start_time=_ns(started))
    finally:
        _NEXT_IDS.reset(token)
    if status != "completed":
        span.set_status(Status(StatusCode.ERROR, status))
    span.end()


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


# --- model calls -------------------------------------------------------------


class TracedProvider:
    """A provider whose every ``complete`` is a ``chat`` span: the model,
    the token usage, why the model stopped; with the capture setting on,
    the prompt and the answer, known secrets redacted."""

    def __init__(self, provider: Provider, redactor: Redactor, capture: bool) -> None:
        self.provider = provider
        self.name = provider.name
        self._redactor = redactor
        self._capture = capture

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        model = request.model or getattr(self.provider, "model", None) or self.name
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.name,
            "gen_ai.system": self.name,
            "gen_ai.request.model": model,
            "gen_ai.agent.name": request.agent,
        }
        with TRACER.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
            if self._capture:
                span.set_attribute("gen_ai.input.messages", self._text(request.messages))
            try:
                completion = self.provider.complete(request, on_partial=on_partial, on_retry=on_retry)
            except ProviderError as exc:
                span.set_attribute("error.type", f"http {exc.status}" if exc.status else type(exc).__name__)
                raise
            _record_answer(span, model, completion)
            if self._capture:
                span.set_attribute("gen_ai.output.messages", self._text([completion.as_message()]))
            return completion

    def _text(self, messages: Sequence[Mapping[str, Any]]) -> str:
        text = self._redactor.text(json.dumps(list(messages), ensure_ascii=False))
        return text if len(text) <= CONTENT_CHARS else text[:CONTENT_CHARS] + "…"


def _record_answer(span: Span, model: str, completion: Completion) -> None:
    # A turn is an answer only once the model said why it stopped, and only
    # "stop" and "tool_calls" are answers (others fail the call: agents/llm/openai_stream.py).
    span.set_attribute("gen_ai.response.finish_reasons", ["tool_calls" if completion.tool_calls else "stop"])
    span.set_attribute("gen_ai.response.model", model)
    if completion.usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", completion.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", completion.usage.completion_tokens)


# --- tool calls ----------------------------------------------------------------


@contextlib.contextmanager
def tool_span(name: str, call_id: str, run_id: str, step_id: str) -> Iterator[Span]:
    """The ``execute_tool`` span of one tool call (its outcome: ``tool_outcome``)."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "zenweb.run.id": run_id,
        "zenweb.step.id": step_id,
    }
    with TRACER.start_as_current_span(f"execute_tool {name}", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


def tool_outcome(span: Span, *, ok: bool, pending: bool, queued: bool, error_kind: str | None) -> None:
    """What became of the call: ok, failed (and why), waiting for a person
    (an ``approval_requested`` event), queued as a task of its own."""
    outcome = "queued" if queued else "waiting_for_approval" if pending else "ok" if ok else "error"
    span.set_attribute("zenweb.tool.outcome", outcome)
    if outcome == "waiting_for_approval":
        span.add_event("approval_requested")
    elif outcome == "queued":
        span.add_event("waiting_for_tool_task")
    if not ok:
        span.set_attribute("error.type", error_kind or "tool_error")
        span.set_status(Status(StatusCode.ERROR))
