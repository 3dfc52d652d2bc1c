"""Approvals decided on the run page, as people use it in Chromium: the
waiting run's first screen shows what waits (the command it will run, who
asked, since when); the requester has no Approve or Reject; an approver
decides there, and both pages show the audit block live, without a reload.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import log_in, screenshot, status

pytestmark = pytest.mark.browser

COMMAND = "rm -rf -- build"


def ask_for_cleanup(page, server) -> str:
    """The viewer's command for the destructive cleanup; leaves `page` on its run page."""
    page.goto(f"{server.base_url}/")
    page.fill("form.command-form input[name=command]", "Run cleanup workspace workflow")
    page.click("form.command-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    return page.url.removeprefix(server.base_url)


def test_an_approver_approves_on_the_run_page_and_both_pages_show_the_audit_live(open_page, server):
    asker = open_page()
    log_in(asker, server, user="viewer")
    run_path = ask_for_cleanup(asker, server)
    asker.evaluate("window.__zenwebMarker = 1")

    # What waits is on the first screen, the command whole; the requester cannot decide it.
    waiting = asker.locator("#run-approvals .approval-pending")
    expect(waiting).to_contain_text(COMMAND)
    expect(waiting).to_contain_text("asked by viewer")
    expect(waiting).to_contain_text("Your own request: another approver must decide it.")
    assert asker.locator("#run-approvals button").count() == 0
    command_box = asker.locator("#run-approvals .command-line").first.bounding_box()
    assert command_box["y"] + command_box["height"] <= 800, f"the command is below the fold: {command_box}"
    assert asker.locator("header nav a", has_text="Approvals").count() == 0

    approver = open_page()
    log_in(approver, server, next_path=run_path, user="approver")
    form = approver.locator("#run-approvals form.decide")
    form.locator("input[name=reason]").fill("only <build> output")
    screenshot(approver, "run-page-approval-waiting")
    form.locator("button[value=approve]").click()

    for page in (approver, asker):
        audit = page.locator("#run-approvals .approval-decided[data-status=approved] .audit")
        expect(audit).to_contain_text("approver approved")
        expect(audit).to_contain_text("“only <build> output”")
    assert approver.locator("#run-approvals button").count() == 0
    asker.wait_for_selector("#run-status[data-status=completed]", timeout=30_000)
    assert asker.evaluate("window.__zenwebMarker") == 1  # no reload
    assert asker.url.endswith(run_path)
    screenshot(asker, "run-page-approval-decided")


def test_an_approver_rejects_with_a_reason_and_the_run_reads_blocked(open_page, server):
    asker = open_page()
    log_in(asker, server, user="viewer")
    run_path = ask_for_cleanup(asker, server)

    approver = open_page()
    log_in(approver, server, next_path=run_path, user="approver")
    form = approver.locator("#run-approvals form.decide")
    form.locator("button[value=reject]").click()  # no reason: the browser asks for one
    assert form.locator("input[name=reason]:invalid").count() == 1
    form.locator("input[name=reason]").fill("not today")
    form.locator("button[value=reject]").click()

    audit = asker.locator("#run-approvals .approval-decided[data-status=rejected] .audit")
    expect(audit).to_contain_text("approver rejected")
    expect(audit).to_contain_text("“not today”")
    asker.wait_for_selector("#run-status[data-status=blocked]")
    assert status(approver) == "blocked"
