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
