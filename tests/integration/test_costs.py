"""Cost in money: with a price set, a run's cost on its page, in the API
and in the metrics is its tokens times the price; without one, "no price"."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from agents.prices import Price, parse_prices
from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import OPENAI_TEST_MODEL, register, wait_for_run
from tests.integration.api_client import api
from tests.metrics_scrape import TOKEN, moved, scrape

# The coordinator stays scripted: its price is given too, so the run has a total.
PRICES = {OPENAI_TEST_MODEL: Price(Decimal("2.5"), Decimal("10")), "scripted": Price(Decimal("0.1"), Decimal("0.2"))}


def _finished_run(openai_endpoint, owner) -> Run:
    openai_endpoint.push_text("High tide at 6am.")
    run = wait_for_run(do_create_run(register("openai_step"), {}, user=owner))
    assert run.status == Run.Status.COMPLETED
    return run


def _expected(step) -> Decimal:
    price = PRICES[OPENAI_TEST_MODEL if step.step_id == "analyse" else "scripted"]
    return (price.prompt * step.prompt_tokens + price.completion * step.completion_tokens) / 1_000_000


@pytest.mark.django_db(transaction=True)
def test_a_priced_runs_cost_is_its_tokens_times_the_price(settings, celery_worker, openai_endpoint, owner):
    settings.ZENWEB_MODEL_PRICES = PRICES
    settings.ZENWEB_METRICS_TOKEN = TOKEN
    before = scrape(Client())

    run = _finished_run(openai_endpoint, owner)

    analyse = run.steps.get(step_id="analyse")
    assert analyse.prompt_tokens > 0 and analyse.completion_tokens > 0
    total = sum((_expected(step) for step in run.steps.all()), Decimal(0))
    body = api(owner).get(f"/api/runs/{run.pk}").json()
    assert Decimal(body["cost"]) == total.quantize(Decimal("0.000001"))
    assert body["unpriced_models"] == []
    steps = {step["step_id"]: step for step in body["steps"]}
    assert Decimal(steps["analyse"]["cost"]) == _expected(analyse).quantize(Decimal("0.000001"))
    client = Client()
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"cost {total:.6f}" in page
    assert f"cost {_expected(analyse):.6f}" in page  # on the step's transcript
    after = scrape(Client())
    spent = moved(before, after, "zenweb_model_cost_total", model=OPENAI_TEST_MODEL)
    assert spent == pytest.approx(float(_expected(analyse)))


@pytest.mark.django_db(transaction=True)
def test_a_run_of_a_model_without_a_price_says_no_price(settings, celery_worker, openai_endpoint, owner):
    settings.ZENWEB_MODEL_PRICES = {"scripted": PRICES["scripted"]}

    run = _finished_run(openai_endpoint, owner)

    body = api(owner).get(f"/api/runs/{run.pk}").json()
    assert body["cost"] is None
    assert body["unpriced_models"] == [OPENAI_TEST_MODEL]
    assert {step["step_id"]: step["cost"] for step in body["steps"]}["analyse"] is None
    client = Client()
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"cost no price ({OPENAI_TEST_MODEL})" in page
    assert "cost 0.000000" not in page


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("not json", "not JSON"),
        ('{"m": {"prompt": 1}}', 'ZENWEB_MODEL_PRICES["m"]: give "prompt" and "completion"'),
        ('{"m": {"prompt": -1, "completion": 2}}', 'ZENWEB_MODEL_PRICES["m"].prompt: -1 is not a price'),
        ('{"m": {"prompt": "a lot", "completion": 2}}', "ZENWEB_MODEL_PRICES[\"m\"].prompt: 'a lot' is not a price"),
    ],
)
def test_a_wrong_price_table_is_refused_naming_the_model_and_field(text, named):
    with pytest.raises(ValueError) as refused:
        parse_prices(text)
    assert named in str(refused.value)


def test_prices_are_read_per_million_tokens():
    prices = parse_prices(json.dumps({"gpt-x": {"prompt": 3, "completion": "15", "cached": 0.3}}))
    assert prices["gpt-x"].cost(1_000_000, 2_000) == Decimal("3.03")
