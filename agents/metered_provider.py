"""A model provider whose calls are counted for Prometheus (agents/metrics.py)."""

from __future__ import annotations

import time

from agents.llm import Completion, CompletionRequest, PartialCallback, Provider, RetryCallback, Usage
from agents.metrics import model_called, model_failed


class MeteredProvider:
    """``provider``, each of its calls counted: latency, tokens, outcome by model."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.name = provider.name

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        model = request.model or getattr(self.provider, "model", None) or self.name
        started = time.monotonic()
        try:
            completion = self.provider.complete(request, on_partial=on_partial, on_retry=on_retry)
        except Exception:
            model_failed(model, time.monotonic() - started)
            raise
        usage = completion.usage or Usage()
        model_called(model, time.monotonic() - started, usage.prompt_tokens, usage.completion_tokens)
        return completion
