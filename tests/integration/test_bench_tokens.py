"""The bench's token rows (bench/token_budgets.py): a local endpoint that
counts what zenweb's openai provider sends it with tiktoken, the handler's
prompt for one command with a catalog of 50 workflows, and who spends the
tokens of a research_brief run."""

from __future__ import annotations

import os

import pytest

from agents.handler import DEFAULT_BUDGET_TOKENS
from bench import token_budgets

pytestmark = pytest.mark.django_db


def test_the_handlers_prompt_with_50_workflows_fits_the_contracts_budget():
    before = os.environ.get("ZENWEB_LLM")

    measured = token_budgets.handler_prompt(workflows=50)

    # The endpoint counted the prompt the handler sent, and the handler's
    # own count (the one that compacts the catalog) agrees.
    assert measured["compacted"] is True and measured["status"] == "needs_more_info"
    assert 1_000 < measured["prompt_tokens"] <= DEFAULT_BUDGET_TOKENS == 2_500
    assert os.environ.get("ZENWEB_LLM") == before  # the openai settings were the measurement's only


@pytest.mark.django_db(transaction=True)  # the run's tasks are queued when its start commits
def test_it_counts_the_coordinators_and_the_workers_tokens_of_a_research_brief_run():
    measured = token_budgets.coordinator_share(worker_tokens=800)

    assert measured["status"] == "completed"
    # The coordinator's plan, its look at the spawns and its finish; two
    # searches, a price history, a write and a read, and each worker's answer.
    assert measured["requests"] == 11
    assert 0 < measured["coordinator"] < measured["total"]
    assert measured["total"] - measured["coordinator"] > 3 * 800
