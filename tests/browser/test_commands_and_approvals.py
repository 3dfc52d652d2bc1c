"""Governance in a real browser: a command typed into the command box runs
live, its tool call's artifact opens, its claims link to their sources; a
destructive command waits until an approver approves it, and someone without
the permission is refused; a command that started nothing goes on from its
page (a clarification's button, a field for a missing input). Screenshots go
to test-output/screenshots/."""

from __future__ import annotations

import re

import pytest

from tests.browser.harness import log_in, screenshot, status, wait_until_finished

pytestmark = pytest.mark.browser


def send_command(page, server, text: str, mode: str = "chat") -> None:
    page.goto(f"{server.base_url}/")
    page.fill("form.command-form input[name=command]", text)
    page.select_option("form.command-form select[name=mode]", mode)
    page.click("form.command-form button[type=submit]")


def test_it_runs_a_command_and_opens_a_tool_calls_artifact(open_page, server):
    page = open_page()
    log_in(page, server)

    send_command(page, server, "Run research workflow for laptops under $1000")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.evaluate("window.__zenwebMarker = 1")
    wait_until_finished(page)

    # The routing graph was redrawn live: the step is done, and it reported
    # to the coordinator, with no reload of the page.
    assert page.evaluate("window.__zenwebMarker") == 1
    node = page.locator('#routing-graph [data-node="search"]')
    assert node.get_attribute("data-status") == "completed"
    assert page.locator('#routing-graph [data-node="coordinator"]').get_attribute("data-status") == "completed"

    artifact = page.locator("#tool-calls details.artifact").first
    artifact.locator("summary").click()
    table = artifact.locator("table.artifact-table")
    assert table.is_visible()
    assert "Aster Swift 14" in table.inner_text()
    badge = page.locator("#tool-calls .bounds .badge").first.inner_text()
    assert re.fullmatch(r"\d+ of \d+(, truncated)?", badge), badge
    source = page.locator("#run-governance table.claims a").first
    assert source.get_attribute("href").startswith("https://")
    assert page.locator("#run-governance .status").first.inner_text().strip() == "success"
    screenshot(page, "run-with-artifact-and-claims")


def test_it_refuses_the_approvals_queue_to_someone_without_the_permission(open_page, server):
    page = open_page()
    log_in(page, server, user="viewer")

    response = page.goto(f"{server.base_url}/approvals/")

    assert response.status == 403
    page.goto(f"{server.base_url}/")
    assert page.locator("header nav a", has_text="Approvals").count() == 0


def test_it_runs_a_destructive_command_only_after_an_approver_approves(open_page, server):
    asker = open_page()
    log_in(asker, server, user="viewer")
    send_command(asker, server, "Run cleanup workspace workflow")
    asker.wait_for_url(re.compile(r".*/runs/\d+/$"))
    assert status(asker) == "awaiting_approval"
    assert "Waiting for approval" in asker.locator("#run-approvals").inner_text()
    run_path = asker.url.removeprefix(server.base_url)

    approver = open_page()
    log_in(approver, server, next_path="/approvals/", user="approver")
    request = approver.locator("article.approval", has_text="cleanup_workspace").first
    request.wait_for()
    screenshot(approver, "approvals-queue")
    request.locator("input[name=reason]").fill("only build output")
    # Reading elsewhere on the page while the queue refreshes (every 2 s)
    # keeps what was typed.
    approver.locator("h1").first.click()
    approver.wait_for_timeout(2_500)
    assert request.locator("input[name=reason]").input_value() == "only build output"
    request.locator("button[value=approve]").click()
    approver.wait_for_url(re.compile(r".*/approvals/$"))
    assert "approved" in approver.locator(".flash").first.inner_text()

    # The asker's page moves on by itself: no reload.
    wait_until_finished(asker)
    assert asker.url.endswith(run_path)
    assert "deleted build" in asker.locator("#tool-calls").inner_text()


def test_a_clarification_button_starts_the_chosen_workflow(open_page, server):
    page = open_page()
    log_in(page, server)
    send_command(page, server, "find laptops under $1000 and write a buying guide")
    page.wait_for_url(re.compile(r".*/commands/\d+/$"))

    page.click("#clarification-options button[data-workflow=research_brief]")

    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    assert "research_brief" in page.locator("#run-header h1").inner_text()
    assert "query=find laptops under $1000 and write a buying guide" in page.locator("#run-inputs").inner_text()
    wait_until_finished(page)


def test_a_missing_input_is_given_in_a_field_and_the_run_starts_with_it(open_page, server):
    page = open_page()
    log_in(page, server)
    send_command(page, server, "Run research workflow for")
    page.wait_for_url(re.compile(r".*/commands/\d+/$"))
    assert page.locator("#command-status").inner_text().strip() == "needs_more_info"

    page.fill("#give-inputs input[name=input-query]", "laptops under $1000")
    page.click("#give-inputs button[type=submit]")

    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    assert "research" in page.locator("#run-header h1").inner_text()
    assert "query=laptops under $1000" in page.locator("#run-inputs").inner_text()
    wait_until_finished(page)


def test_it_shows_each_criterion_and_constraint_of_a_command_over_its_budget(open_page, server):
    # The catalog's research workflow checks its claims' sources and prices.
    page = open_page()
    log_in(page, server)

    send_command(page, server, "Run research workflow for the top 5 laptops under $500")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    wait_until_finished(page)

    governance = page.locator("#run-governance")
    assert governance.locator(".status").first.inner_text().strip() == "blocked"
    assert "requires retry" in governance.inner_text()
    checks = [" ".join(item.split()) for item in page.locator("#run-governance #result-checks li").all_inner_texts()]
    over = "'Aster Swift 14 @ $849' over the budget of $500"
    assert checks == [
        "met every claim has a url and a source_ref all 2 claims have one",
        f"not met every price within the budget {over}",
        f"violated budget: at most $500 {over}",
        "satisfied count: at most 5 1 priced claim recorded",
    ]
    screenshot(page, "run-with-criteria")

    # The command's page says the same.
    governance.locator("a", has_text="command #").click()
    page.wait_for_url(re.compile(r".*/commands/\d+/$"))
    assert page.locator("#command-status").inner_text().strip() == "blocked"
    assert [
        " ".join(item.split()) for item in page.locator("#command-live #result-checks li").all_inner_texts()
    ] == checks

    page.goto(f"{server.base_url}/catalog/")
    research = page.locator("#workflow-research .criteria").inner_text()
    assert research == "success criteria: every claim has a url and a source_ref; every price within the budget"
