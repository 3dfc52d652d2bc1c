"""A step that asks a person (ask_person), answered from the run page as
people use it in Chromium: the question appears live with its options, the
answer goes in with a click, and the step finishes with it, live, without
a reload; the approvals queue shows a question with a field to answer, and
goes on refreshing while it waits there.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, status

pytestmark = pytest.mark.browser

WORKFLOWS = ROOT / "tests" / "workflows" / "ask"


def register(server, name: str) -> None:
    path = WORKFLOWS / f"{name}.yaml"
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(path)!r}).read(), {str(path)!r})"
    )


def test_a_waiting_step_is_answered_on_the_run_page_and_finishes_with_the_answer_live(open_page, server):
    register(server, "ask_colour")
    page = open_page()
    log_in(page, server, user="viewer")
    start_run_from_list(page, server, workflow="ask_colour")
    page.evaluate("window.__zenwebMarker = 1")

    question = page.locator("#run-approvals .question[data-status=pending]")
    # The model's text is shown as text: its markup is not the page's.
    expect(question).to_contain_text("Which colour should the <b>fence</b> be?")
    assert question.locator("b").count() == 0
    assert status(page) == "running"
    screenshot(page, "run-page-question-waiting")
    question.locator("button[value=blue]").click()

    audit = page.locator("#run-approvals .approval-decided[data-status=answered] .audit")
    expect(audit).to_contain_text("viewer answered")
    expect(audit).to_contain_text("“blue”")
    page.wait_for_selector("#run-status[data-status=completed]", timeout=30_000)
    expect(page.locator("details[id$=-output] pre").first).to_contain_text('"answer":"blue"', use_inner_text=False)
    assert page.evaluate("window.__zenwebMarker") == 1  # no reload
    screenshot(page, "run-page-question-answered")


def test_an_approver_answers_a_free_text_question_in_the_approvals_queue(open_page, server):
    register(server, "ask_free")
    asker = open_page()
    log_in(asker, server, user="viewer")
    start_run_from_list(asker, server, workflow="ask_free")
    run_path = asker.url.removeprefix(server.base_url)
    expect(asker.locator("#run-approvals .question textarea[name=answer]")).to_be_visible()

    # An answer being typed on the run page is kept when the card is drawn again (a live update).
    asker.locator("#run-approvals textarea[name=answer]").fill("half an ans")
    with asker.expect_response(lambda r: r.url.endswith("/approvals/")):
        asker.evaluate("htmx.trigger(document.getElementById('run-approvals'), 'approvals-changed')")
    expect(asker.locator("#run-approvals textarea[name=answer]")).to_have_value("half an ans")

    approver = open_page()
    log_in(approver, server, next_path="/approvals/", user="approver")
    question = approver.locator("#approval-queue .question", has_text="What should the report be called?")
    expect(question).to_be_visible()
    # The queue goes on refreshing while an empty answer field waits in it: a new question appears.
    register(server, "ask_colour")
    other = open_page()
    log_in(other, server, user="viewer")
    start_run_from_list(other, server, workflow="ask_colour")
    expect(approver.locator("#approval-queue .question", has_text="fence")).to_be_visible()
    question.locator("textarea[name=answer]").fill("Quarterly <review>")
    question.locator("button[type=submit]").click()

    expect(approver.locator(".flash")).to_contain_text("answered")
    asker.wait_for_selector("#run-status[data-status=completed]", timeout=30_000)
    audit = asker.locator("#run-approvals .approval-decided[data-status=answered] .audit")
    expect(audit).to_contain_text("approver answered")
    expect(audit).to_contain_text("“Quarterly <review>”")
    assert asker.url.endswith(run_path)
