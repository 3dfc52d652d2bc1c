"""The run header's controls in Chromium, for who may use them: the run's
starter gets Cancel, which asks first and says what stops (dismissed, the
run goes on; accepted, the page reads "Cancelled: cancelled by ..." live, not
an error), and a Resume that says what it does; an approver looking at
someone else's run gets neither.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.harness import ROOT, log_in, start_run_from_list, status

pytestmark = pytest.mark.browser

# Watches the page for a Cancel or Resume button appearing.
SAW_A_CONTROL = """() => {
  window.__sawControl = false;
  new MutationObserver(() => {
    if (document.querySelector("#run-cancel button, #run-resume button")) window.__sawControl = true;
  }).observe(document.body, {childList: true, subtree: true});
}"""
BUSY = ROOT / "tests" / "workflows" / "browser" / "busy.yaml"


@pytest.fixture(scope="module")
def registered(server):
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(BUSY)!r}).read(), {str(BUSY)!r})"
    )


def test_cancel_asks_first_and_a_cancelled_run_reads_who_cancelled_it(open_page, server, registered):
    page = open_page()
    log_in(page, server, user="viewer")
    start_run_from_list(page, server, workflow="busy")
    page.wait_for_selector("#run-status[data-status=running]")
    resume = page.locator("#run-resume button")
    expect(resume).to_be_visible()
    expect(resume).to_have_text("Resume stuck work")
    assert "Queue again the work of a run that seems stuck" in resume.get_attribute("title")

    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#run-cancel button")
    page.wait_for_timeout(300)  # a request the dismissal let through would have gone by now
    assert asked and "Its unfinished steps stop at their next turn" in asked[0], asked
    assert status(page) == "running"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#run-cancel button")
    page.wait_for_selector("#run-status[data-status=cancelled]")
    expect(page.locator("#run-cancelled")).to_have_text("Cancelled: cancelled by viewer")
    assert page.locator("#run-header .run-error").count() == 0
    assert page.locator("#run-header button").count() == 0


def test_an_approver_gets_no_cancel_on_someone_elses_run(open_page, server):
    asker = open_page()
    log_in(asker, server, user="viewer")
    asker.goto(f"{server.base_url}/")
    asker.fill("form.command-form input[name=command]", "Run cleanup workspace workflow")
    asker.click("form.command-form button[type=submit]")
    asker.wait_for_selector("#run-status[data-status=awaiting_approval]")
    expect(asker.locator("#run-cancel button")).to_be_visible()

    approver = open_page()
    log_in(approver, server, next_path=asker.url.removeprefix(server.base_url), user="approver")
    assert approver.locator("#run-cancel button, #run-resume button").count() == 0
    approver.evaluate(SAW_A_CONTROL)
    approver.locator("#run-approvals input[name=reason]").fill("fine")
    approver.click("#run-approvals button[value=approve]")

    # Decided, the run starts, runs and ends: no live update gave the approver a control.
    approver.wait_for_selector("#run-status[data-status=completed]", timeout=30_000)
    assert approver.evaluate("window.__sawControl") is False
