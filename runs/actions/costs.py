"""What a run's tokens cost at the operator's prices (agents/prices.py,
settings.ZENWEB_MODEL_PRICES): by step, and in all. A step's tokens are
its agent's model's; a model with no price gives no cost (None), and a
run with any such step has no total: "no price", never 0."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings

from agents.metered_provider import model_name
from agents.spec import AgentSpec, WorkflowSpec
from runs.actions.catalog import workflow_spec
from runs.models import Run, Step


def step_model(spec: WorkflowSpec, step: Step) -> str:
    agent = spec.agents.get(step.agent) or AgentSpec()
    return model_name(agent.model_copy(update={"model": step.model}) if step.model else agent)


@dataclass
class RunCost:
    """``total`` None when a step that spent tokens has a model with no price
    (``unpriced`` names them); ``by_step`` a step's cost, None likewise."""

    total: Decimal | None
    by_step: dict[int, Decimal | None] = field(default_factory=dict)
    unpriced: list[str] = field(default_factory=list)


def cost_of(run: Run, steps: Iterable[Step]) -> RunCost:
    prices = settings.ZENWEB_MODEL_PRICES
    spec = workflow_spec(run.workflow)
    by_step: dict[int, Decimal | None] = {}
    unpriced: set[str] = set()
    for step in steps:
        if not (step.prompt_tokens or step.completion_tokens):
            by_step[step.pk] = Decimal(0)
            continue
        model = step_model(spec, step)
        price = prices.get(model)
        if price is None:
            unpriced.add(model)
        by_step[step.pk] = price.cost(step.prompt_tokens, step.completion_tokens) if price else None
    total = None if unpriced else sum((c for c in by_step.values() if c is not None), Decimal(0))
    return RunCost(total, by_step, sorted(unpriced))


def shown(cost: Decimal | None) -> str:
    """A cost as pages and the API show it: six decimals, or "no price"."""
    return "no price" if cost is None else f"{cost:.6f}"


# The model calls a run's API lists, newest last: at most this many; its
# page lists fewer (500 rows were a third of a long run's page), the rest
# are in the API and the event list.
CALLS_SHOWN = 500
CALLS_ON_PAGE = 50


@dataclass
class CallRow:
    """One model call, from its turn's agent_turn event: None where the call
    was not measured (a run from before, or a field its model did not report)."""

    seq: int
    step_id: str
    turn: int
    model: str | None
    latency_ms: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: Decimal | None
    retries: int | None
    finish_reason: str | None


def model_calls(run: Run, limit: int = CALLS_SHOWN) -> list[CallRow]:
    """The run's last ``limit`` model calls, oldest first, each with its
    cost at the operator's prices (None: no price, or not measured)."""
    prices = settings.ZENWEB_MODEL_PRICES
    events = run.events.filter(type="agent_turn").order_by("-seq").values_list("seq", "step_id", "data")
    rows = []
    for seq, step_id, data in reversed(events[:limit]):
        model, prompt, completion = data.get("model"), data.get("prompt_tokens"), data.get("completion_tokens")
        price = prices.get(model) if model else None
        cost = price.cost(prompt or 0, completion or 0) if price else None
        rows.append(
            CallRow(
                seq,
                step_id,
                data.get("turn", 0),
                model,
                data.get("latency_ms"),
                prompt,
                completion,
                cost,
                data.get("retries"),
                data.get("finish_reason"),
            )
        )
    return rows
