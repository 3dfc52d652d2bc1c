"""A workflow's success criteria and a command's constraints, checked
against the claims of a finished run (docs/workflows.md, "Success criteria").

Pure functions: the caller passes the claims and the command's text, and
gets back one check per criterion or constraint, each met or not and why.

The vocabulary of ``successCriteria`` entries (case and spacing do not
matter; ``N`` is a whole number):

- ``every claim has a url``
- ``every claim has a source_ref``
- ``every claim has a url and a source_ref``
- ``every claim has a ttl``
- ``at least N claims`` / ``at most N claims``
- ``every price within the budget`` (also ``every price within the
  command's budget``): every claim that states a price (``$1,499``) is at or
  under the budget the command states ("under $1000"); met when the command
  states none.

Constraints read from a command: a budget ("under $1000", "below $800",
"at most $1,200", "max $500", "budget $900") and a count ("top 5",
"5 best", "3 cheapest") against the items found: the claims that state a
price when any does, else every claim. Each is checked on every run of the
command, whatever its workflow's criteria say.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Literal, Protocol

from pydantic import BaseModel


class ClaimLike(Protocol):
    """What the checks read of a claim."""

    @property
    def claim(self) -> str: ...
    @property
    def url(self) -> str | None: ...
    @property
    def source_ref(self) -> str | None: ...
    @property
    def ttl(self) -> str | None: ...


class CriterionCheck(BaseModel):
    """One of a workflow's success criteria, checked against a run's claims."""

    criterion: str
    met: bool
    why: str


class ConstraintCheck(BaseModel):
    """A constraint read from the command, checked against a run's claims."""

    constraint: str
    status: Literal["satisfied", "violated"]
    why: str


VOCABULARY = (
    "every claim has a url",
    "every claim has a source_ref",
    "every claim has a url and a source_ref",
    "every claim has a ttl",
    "at least N claims",
    "at most N claims",
    "every price within the budget",
)

_FIELDS = {
    "every claim has a url": ("url",),
    "every claim has a source_ref": ("source_ref",),
    "every claim has a url and a source_ref": ("url", "source_ref"),
    "every claim has a ttl": ("ttl",),
}
_BUDGET_CRITERIA = ("every price within the budget", "every price within the command's budget")
_COUNT_CRITERION = re.compile(r"^at (least|most) (\d{1,6}) claims?$")
_PRICE = re.compile(r"\$\s?(\d[\d,]*(?:\.\d+)?)")
_BUDGET_WORDS = r"under|below|less than|at most|up to|max(?:imum)?|budget(?: of)?|no more than|within"
_BUDGET = re.compile(rf"\b(?:{_BUDGET_WORDS})\s+\$\s?(\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_COUNT = re.compile(r"\btop\s+(\d{1,4})\b|\b(\d{1,4})\s+(?:best|cheapest|top)\b", re.IGNORECASE)


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def criterion_problem(text: str) -> str | None:
    """Why zenweb cannot check this ``successCriteria`` entry, or None if it can."""
    entry = _normal(text)
    if entry in _FIELDS or entry in _BUDGET_CRITERIA or _COUNT_CRITERION.match(entry):
        return None
    return f"{text!r} is not a success criterion zenweb can check; use one of: " + "; ".join(VOCABULARY)


def check_criteria(criteria: Sequence[str], claims: Sequence[ClaimLike], command: str) -> list[CriterionCheck]:
    """Each criterion checked against the run's claims (``command`` gives the budget)."""
    return [_check_one(text, claims, command) for text in criteria]


def _check_one(text: str, claims: Sequence[ClaimLike], command: str) -> CriterionCheck:
    entry = _normal(text)
    if entry in _FIELDS:
        return _check_fields(text, _FIELDS[entry], claims)
    if entry in _BUDGET_CRITERIA:
        budget = read_budget(command)
        if budget is None:
            return CriterionCheck(criterion=text, met=True, why="the command states no budget")
        over = _over_budget(claims, budget)
        return CriterionCheck(criterion=text, met=not over, why=_budget_why(over, budget))
    count = _COUNT_CRITERION.match(entry)
    if count is None:
        # Refused when the workflow was registered; a version stored before
        # that check cannot be met by a run.
        return CriterionCheck(criterion=text, met=False, why="zenweb cannot check this criterion")
    bound, n = count.group(1), int(count.group(2))
    met = len(claims) >= n if bound == "least" else len(claims) <= n
    return CriterionCheck(criterion=text, met=met, why=f"{_claims(len(claims))} recorded")


def _check_fields(text: str, fields: Sequence[str], claims: Sequence[ClaimLike]) -> CriterionCheck:
    lacking = [c.claim for c in claims if any(not getattr(c, field) for field in fields)]
    if lacking:
        names = " and ".join(fields)
        return CriterionCheck(
            criterion=text, met=False, why=f"{_quoted(lacking)} lack{'s' if len(lacking) == 1 else ''} a {names}"
        )
    return CriterionCheck(criterion=text, met=True, why=f"all {_claims(len(claims))} have one")


def check_constraints(command: str, claims: Sequence[ClaimLike]) -> list[ConstraintCheck]:
    """The budget and count the command states, each checked against the run's claims."""
    checks = []
    budget = read_budget(command)
    if budget is not None:
        over = _over_budget(claims, budget)
        status: Literal["satisfied", "violated"] = "violated" if over else "satisfied"
        checks.append(
            ConstraintCheck(constraint=f"budget: at most ${budget:,}", status=status, why=_budget_why(over, budget))
        )
    count = read_count(command)
    if count is not None:
        # The items found: the claims that state a price when any does (a
        # run may add claims about an item, such as its battery life).
        priced = [c for c in claims if price_of(c.claim) is not None]
        items = len(priced) if priced else len(claims)
        status = "violated" if items > count else "satisfied"
        why = f"{items} priced {'claim' if items == 1 else 'claims'}" if priced else _claims(items)
        why += " recorded"
        checks.append(ConstraintCheck(constraint=f"count: at most {count}", status=status, why=why))
    return checks


def read_budget(command: str) -> Decimal | None:
    """The budget a command states ("under $1000"), or None."""
    found = _BUDGET.search(command)
    return _amount(found.group(1)) if found else None


def read_count(command: str) -> int | None:
    """How many results a command asks for ("top 5"), or None."""
    found = _COUNT.search(command)
    return int(found.group(1) or found.group(2)) if found else None


def price_of(claim: str) -> Decimal | None:
    """The price a claim states ("Korvo Pro @ $1,499"), or None."""
    found = _PRICE.search(claim)
    return _amount(found.group(1)) if found else None


def failed(criteria: Sequence[CriterionCheck], constraints: Sequence[ConstraintCheck]) -> str | None:
    """What a blocked result says of the criteria not met and constraints violated, or None."""
    parts = [f"success criterion not met: {c.criterion} ({c.why})" for c in criteria if not c.met]
    parts += [f"constraint violated: {c.constraint} ({c.why})" for c in constraints if c.status == "violated"]
    return "; ".join(parts) or None


def _amount(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def _over_budget(claims: Sequence[ClaimLike], budget: Decimal) -> list[str]:
    prices = [(c.claim, price_of(c.claim)) for c in claims]
    return [claim for claim, price in prices if price is not None and price > budget]


def _budget_why(over: list[str], budget: Decimal) -> str:
    if over:
        return f"{_quoted(over)} over the budget of ${budget:,}"
    return f"every price stated is at most ${budget:,}"


def _claims(n: int) -> str:
    return f"{n} claim" if n == 1 else f"{n} claims"


def _quoted(texts: list[str]) -> str:
    shown = ", ".join(repr(t) for t in texts[:3])
    return shown + (f" and {len(texts) - 3} more" if len(texts) > 3 else "")
