"""The run page lists each model call of a finished run: its step, model,
latency, tokens, cost at the operator's price, retries and finish reason
(a real browser, `manage.py serve` with a step on the local fake endpoint)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, wait_until_finished
from tests.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.browser

PROMPT, COMPLETION = Decimal("3"), Decimal("12")  # per million tokens


@pytest.fixture(scope="module")
def endpoint():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def server_env(endpoint):
    return {
        "OPENAI_BASE_URL": endpoint.base_url,
        "OPENAI_API_KEY": "sk-browser-test-not-a-secret",
        "ZENWEB_MODEL": "tide-model",
        "ZENWEB_MODEL_PRICES": json.dumps({"tide-model": {"prompt": str(PROMPT), "completion": str(COMPLETION)}}),
    }


def test_the_run_page_lists_each_model_call(open_page, server, endpoint):
    path = ROOT / "tests" / "workflows" / "openai_step.yaml"
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(path)!r}).read(), {str(path)!r})"
    )
    endpoint.push_error(503, "busy, try again")
    endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    endpoint.push_text("High tide at 6am.")
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server, workflow="openai_step")
    wait_until_finished(page)

    page.reload()
    rows = page.locator("#model-calls tbody tr").filter(has_text="tide-model")
    assert rows.count() == 2
    cells = [[cell.strip() for cell in rows.nth(n).locator("td").all_inner_texts()] for n in range(2)]
    screenshot(page, "model-calls")
    # step, turn, model, latency ms, prompt, completion, cost, retries, finish
    assert [(c[0], c[1], c[2], c[7], c[8]) for c in cells] == [
        ("analyse", "1", "tide-model", "1", "tool_calls"),
        ("analyse", "2", "tide-model", "0", "stop"),
    ]
    for c in cells:
        assert int(c[3]) >= 0
        prompt, completion = int(c[4]), int(c[5])
        assert prompt > 0
        assert Decimal(c[6]) == ((PROMPT * prompt + COMPLETION * completion) / 1_000_000).quantize(Decimal("0.000001"))
    # The scripted coordinator has no price: said so, never 0.
    coordinator = page.locator("#model-calls tbody tr").filter(has_text="coordinator").first
    assert coordinator.locator("td").nth(6).inner_text().strip() == "no price"
