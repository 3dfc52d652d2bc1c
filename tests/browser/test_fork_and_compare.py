"""Fork a completed run at its second step with edited instructions, in a
real browser (issue #52): the model is asked only for the steps from the
fork point on (counted at the local OpenAI-compatible endpoint), and the
compare page shows the changed output."""

from __future__ import annotations

import re

import pytest

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, wait_until_finished
from tests.fake_openai_server import FakeOpenAIServer

pytestmark = pytest.mark.browser

EDITED = "Check the times against the harbour's own table."


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


def user_prompts(requests) -> list[str]:
    return [next(m["content"] for m in r.body["messages"] if m["role"] == "user") for r in requests]


def test_a_fork_at_the_second_step_asks_the_model_from_there_on_and_the_comparison_shows_it(
    open_page, server, endpoint
):
    path = ROOT / "tests" / "workflows" / "forks" / "openai_chain.yaml"
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(path)!r}).read(), {str(path)!r})"
    )
    for answer in ("High tide at 6am.", "The table is right.", "Published: high tide at 6am."):
        endpoint.push_text(answer)
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server, workflow="fork_openai_chain")
    wait_until_finished(page)
    first_run = page.url
    assert len(endpoint.requests) == 3

    endpoint.push_text("The table is wrong: high tide is at <b>7am</b>.")
    endpoint.push_text("Published: high tide at 7am.")
    page.reload()
    page.select_option("#fork-step", "check")
    page.fill("#fork-instructions", EDITED)
    page.click("#fork-run")
    page.wait_for_url(lambda url: url != first_run and re.search(r"/runs/\d+/$", url) is not None)
    wait_until_finished(page)

    asked = endpoint.requests[3:]
    assert len(asked) == 2  # check and publish; draft's answer was reused
    prompts = user_prompts(asked)
    assert prompts[0].startswith(EDITED) and "High tide at 6am." in prompts[0]
    assert prompts[1].startswith("Publish the tide table.")
    page.reload()
    assert "Forked from run #" in page.locator("#forked-from").inner_text()
    assert "reused" in page.locator("#routing-graph").inner_text()
    screenshot(page, "fork-run-page")

    page.click("#compare-with-parent")
    page.wait_for_url(re.compile(r".*/runs/compare/\?a=\d+&b=\d+$"))
    assert page.locator("#compare-draft").get_attribute("data-changed") == "false"
    assert page.locator("#compare-check").get_attribute("data-changed") == "true"
    check = page.locator("#compare-check")
    assert check.locator(".diff-removed").inner_text() == "-The table is right."
    assert check.locator(".diff-added").inner_text() == "+The table is wrong: high tide is at <b>7am</b>."
    assert "completed · reused" in page.locator("#compare-draft").inner_text()
    screenshot(page, "compare-runs")
