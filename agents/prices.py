"""Model prices, per million tokens, as the operator sets them
(ZENWEB_MODEL_PRICES: docs/models.md, "Prices"). zenweb ships none: a
model without one has no cost, never a cost of 0."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

PER = Decimal(1_000_000)
KINDS = ("prompt", "completion", "cached")


@dataclass(frozen=True)
class Price:
    """What a million tokens of each kind cost, in the operator's currency."""

    prompt: Decimal
    completion: Decimal
    cached: Decimal | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        return (self.prompt * prompt_tokens + self.completion * completion_tokens) / PER


def _amount(where: str, value: object) -> Decimal:
    try:
        amount = Decimal(str(value)) if isinstance(value, int | float | str) else None
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite() or amount < 0:
        raise ValueError(f"{where}: {value!r} is not a price (a number of at least 0, per million tokens)")
    return amount


def parse_prices(text: str, where: str = "ZENWEB_MODEL_PRICES") -> dict[str, Price]:
    """The price table in ``text``: a JSON object of model name to
    ``{"prompt": ..., "completion": ..., "cached": ...}`` (cached optional).
    ValueError naming the model and field that is wrong."""
    if not text.strip():
        return {}
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(table, dict):
        raise ValueError(f"{where}: a JSON object of model name to prices is needed")
    prices = {}
    for model, entry in table.items():
        if not isinstance(entry, dict) or not {"prompt", "completion"} <= entry.keys() or entry.keys() - set(KINDS):
            raise ValueError(
                f'{where}["{model}"]: give "prompt" and "completion" (and "cached" if you like), per million tokens'
            )
        amounts = {kind: _amount(f'{where}["{model}"].{kind}', value) for kind, value in entry.items()}
        prices[model] = Price(**amounts)
    return prices
