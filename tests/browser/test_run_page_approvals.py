"""Approvals decided on the run page, as people use it in Chromium: the
waiting run's first screen shows what waits (the command it will run, who
asked, since when); the requester has no Approve or Reject; an approver
decides there, and both pages show the audit block live, without a reload.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, status

pytestmark = pytest.mark.browser

COMMAND = "rm -rf -- build"
WIPE_TWO = ROOT / "tests" / "workflows" / "approvals" / "wipe_two.yaml"


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


def test_under_the_two_person_rule_the_second_approver_sees_the_first_decision_live_and_keeps_their_reason(
    open_page, server
):
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(WIPE_TWO)!r}).read(), {str(WIPE_TWO)!r})"
    )
    asker = open_page()
    log_in(asker, server, user="viewer")
    start_run_from_list(asker, server, workflow="wipe_two")
    run_path = asker.url.removeprefix(server.base_url)

    second = open_page()
    log_in(second, server, next_path=run_path, user="approver")
    expect(second.locator("#run-approvals .approval-pending")).to_contain_text("0 of 2 decisions")
    second.locator("#run-approvals input[name=reason]").fill("checked the target")

    first = open_page()
    log_in(first, server, next_path=run_path, user="admin")
    first.locator("#run-approvals input[name=reason]").fill("fine by me")
    first.click("#run-approvals button[value=approve]")
    expect(first.locator("#no-decision-" + approval_id(first))).to_contain_text("you already decided on this approval")

    # The second approver's card is drawn again live, with the first decision, and what they typed.
    expect(second.locator("#run-approvals .approval-pending")).to_contain_text("1 of 2 decisions: admin approved")
    assert second.locator("#run-approvals input[name=reason]").input_value() == "checked the target"
    second.click("#run-approvals button[value=approve]")

    audit = asker.locator("#run-approvals .approval-decided[data-status=approved] .audit")
    expect(audit).to_contain_text("admin approved")
    expect(audit).to_contain_text("approver approved")
    asker.wait_for_selector("#run-status[data-status=completed]", timeout=30_000)


def approval_id(page) -> str:
    return page.locator("#run-approvals .approval").first.get_attribute("id").removeprefix("run-approval-")
