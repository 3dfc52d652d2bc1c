"""Each model call of a run on its page and in the API: model, latency,
tokens, cost, retries and finish reason."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.test import Client

from agents.prices import Price
from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import OPENAI_TEST_MODEL, register, wait_for_run
from tests.integration.api_client import api

pytestmark = pytest.mark.django_db(transaction=True)

PRICE = Price(Decimal("2"), Decimal("8"))


def test_each_model_call_is_listed_with_how_it_went(settings, celery_worker, openai_endpoint, owner):
    settings.ZENWEB_MODEL_PRICES = {OPENAI_TEST_MODEL: PRICE}
    openai_endpoint.push_error(503, "busy, try again")
    openai_endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}, user=owner), timeout=60)

    assert run.status == Run.Status.COMPLETED
    calls = [c for c in api(owner).get(f"/api/runs/{run.pk}").json()["model_calls"] if c["step_id"] == "analyse"]
    assert [(c["turn"], c["model"], c["retries"], c["finish_reason"]) for c in calls] == [
        (1, OPENAI_TEST_MODEL, 1, "tool_calls"),
        (2, OPENAI_TEST_MODEL, 0, "stop"),
    ]
    step = run.steps.get(step_id="analyse")
    assert sum(c["prompt_tokens"] for c in calls) == step.prompt_tokens
    assert sum(c["completion_tokens"] for c in calls) == step.completion_tokens
    for call in calls:
        assert call["latency_ms"] >= 0
        expected = (PRICE.prompt * call["prompt_tokens"] + PRICE.completion * call["completion_tokens"]) / 1_000_000
        assert Decimal(call["cost"]) == expected.quantize(Decimal("0.000001"))
    client = Client()
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="model-calls"' in page
    assert page.count(f"<code>{OPENAI_TEST_MODEL}</code>") == 2
    # The coordinator is scripted and has no price here.
    assert "no price" in page


def test_the_page_lists_the_last_calls_and_the_api_all_of_them(
    settings, monkeypatch, celery_worker, openai_endpoint, owner
):
    # A long run's calls would fill its page (500 rows were a third of it): the
    # page keeps the last CALLS_ON_PAGE, here 1, and says where the rest are.
    monkeypatch.setattr("runs.views.runs.CALLS_ON_PAGE", 1)
    openai_endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    openai_endpoint.push_text("High tide at 6am.")

    run = wait_for_run(do_create_run(register("openai_step"), {}, user=owner), timeout=60)

    listed = api(owner).get(f"/api/runs/{run.pk}").json()["model_calls"]
    assert len(listed) >= 2
    client = Client()
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count('id="model-call-') == 1
    assert f'id="model-call-{listed[-1]["seq"]}"' in page
    assert "the last 1: all in the API and the events" in page
