"""A model provider whose calls are counted for Prometheus (agents/metrics.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace

from agents.llm import Completion, CompletionRequest, PartialCallback, Provider, RetryCallback, RetryNotice, Usage
from agents.llm.base import CallFacts
from agents.metrics import model_called, model_failed
from agents.prices import Price
from agents.spec import AgentSpec


def model_name(agent: AgentSpec, environ: Mapping[str, str] = os.environ) -> str:
    """The model ``agent``'s calls ask, as build_provider configures it: its
    own, else ZENWEB_MODEL for the openai provider, else the provider's name."""
    provider = (agent.provider or environ.get("ZENWEB_LLM", "")).strip().lower() or "scripted"
    if agent.model:
        return agent.model
    if provider == "openai":
        return environ.get("ZENWEB_MODEL", "").strip() or provider
    return provider


class MeteredProvider:
    """``provider``, each of its calls counted: latency, tokens, outcome and
    cost (at ``prices``) by model, ``model`` unless the request names one."""

    def __init__(self, provider: Provider, model: str, prices: Mapping[str, Price]) -> None:
        self.provider = provider
        self.name = provider.name
        self.model = model
        self.prices = prices

    def complete(
        self,
        request: CompletionRequest,
        *,
        on_partial: PartialCallback | None = None,
        on_retry: RetryCallback | None = None,
    ) -> Completion:
        model = request.model or self.model
        retries: list[RetryNotice] = []

        def retried(notice: RetryNotice) -> None:
            retries.append(notice)
            if on_retry is not None:
                on_retry(notice)

        started = time.monotonic()
        try:
            completion = self.provider.complete(request, on_partial=on_partial, on_retry=retried)
        except Exception:
            model_failed(model, time.monotonic() - started)
            raise
        seconds, usage = time.monotonic() - started, completion.usage or Usage()
        price = self.prices.get(model)
        cost = float(price.cost(usage.prompt_tokens, usage.completion_tokens)) if price else None
        model_called(model, seconds, usage.prompt_tokens, usage.completion_tokens, cost)
        return replace(completion, call=CallFacts(model, round(seconds * 1000), len(retries)))
