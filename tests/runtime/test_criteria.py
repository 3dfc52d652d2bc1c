"""What agents.criteria reads from a command and a claim: the budget, the
count and the price a person wrote, in the ways people write them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.criteria import criterion_problem, price_of, read_budget, read_count


@pytest.mark.parametrize(
    ("command", "budget"),
    [
        ("Run research workflow for laptops under $1000", Decimal(1000)),
        ("find headphones below $ 250 with noise cancelling", Decimal(250)),
        ("monitors at most $1,200.50", Decimal("1200.50")),
        ("a bike, budget of $900", Decimal(900)),
        ("phones Under $700", Decimal(700)),
        ("laptops that cost $1000", None),  # a price, not a bound
        ("the top 5 laptops", None),
    ],
)
def test_it_reads_the_budget_a_command_states(command, budget):
    assert read_budget(command) == budget


@pytest.mark.parametrize(
    ("command", "count"),
    [("the top 5 laptops", 5), ("the 3 cheapest flights", 3), ("10 best tents", 10), ("laptops under $1000", None)],
)
def test_it_reads_how_many_results_a_command_asks_for(command, count):
    assert read_count(command) == count


def test_it_reads_a_claims_price_with_thousands_separators():
    assert price_of("Korvo Pro 16 @ $1,499") == Decimal(1499)
    assert price_of("The Aster Swift 14 lasts about 11 hours") is None


@pytest.mark.parametrize(
    "entry", ["At least 3 claims", "every  claim has a URL", "every price within the command's budget"]
)
def test_it_accepts_the_vocabulary_whatever_the_case_and_spacing(entry):
    assert criterion_problem(entry) is None


def test_it_refuses_an_entry_it_cannot_check_naming_the_vocabulary():
    problem = criterion_problem("results are accurate")
    assert problem is not None
    assert problem.startswith("'results are accurate' is not a success criterion zenweb can check; use one of:")
    assert "at least N claims" in problem
