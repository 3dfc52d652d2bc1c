"""A step's answer appears on the run page while the model generates it: a
real browser, `manage.py serve` (embedded) with its step on the openai
provider, pointed at the local fake endpoint, which streams slowly."""

from __future__ import annotations

import json

import pytest

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, wait_until_finished
from tests.fake_openai_server import Delivery, FakeOpenAIServer

pytestmark = pytest.mark.browser

# Untrusted text: it must show as these characters, never as markup.
ANSWER = "High tide at <b>6am</b> <img src=x onerror=alert(1)>; the spring tides follow the full moon, twice a month."
MESSAGE = json.dumps({"text": "tides are high at Bergen"})
BOX = '#live-answers .partial[data-step="analyse"]'


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
    }


def test_it_shows_the_answer_and_tool_arguments_as_they_stream(open_page, server, endpoint):
    path = ROOT / "tests" / "workflows" / "openai_step.yaml"
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(path)!r}).read(), {str(path)!r})"
    )
    # A send_message call whose arguments arrive 4 characters every 50 ms,
    # then the answer, 4 characters every 100 ms (about 3 s).
    endpoint.push_tool_calls([("call_1", "send_message", MESSAGE)], chunk_delay=0.05)
    endpoint.push_text(ANSWER, delivery=Delivery(chunk_delay=0.1))
    page = open_page()
    log_in(page, server)

    start_run_from_list(page, server, workflow="openai_step")

    page.wait_for_function(
        f"""() => Array.from(document.querySelectorAll('{BOX} .partial-calls code'))
                 .some(c => c.textContent.startsWith('send_message({{"text": "tides'))"""
    )
    page.wait_for_function(f"() => (document.querySelector('{BOX} .partial-text') || {{}}).textContent?.length > 20")
    shown = page.locator(f"{BOX} .partial-text").text_content()
    screenshot(page, "streaming-answer")
    # Part of the answer, before the whole of it, as characters.
    assert ANSWER.startswith(shown) and len(shown) < len(ANSWER)
    assert page.locator(f"{BOX} img, {BOX} b").count() == 0
    assert page.locator("#run-status").get_attribute("data-status") == "running"

    rows = wait_until_finished(page)

    # The partial gave way to the stored answer.
    page.wait_for_selector("#live-answers", state="hidden")
    assert page.locator(BOX).count() == 0
    turns = page.locator('#event-list details.event[data-type="agent_turn"][data-step="analyse"] pre')
    assert ANSWER in json.loads(turns.last.text_content())["content"]
    assert [row["type"] for row in rows].count("agent_turn") >= 2
    assert endpoint.requests[-1].body["stream"] is True
