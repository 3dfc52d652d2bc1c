"""/api/docs: the API's interactive page (django-ninja's Swagger UI) renders
every operation from files this server serves, under the dashboard's
Content-Security-Policy, and tries an operation out with the session."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.browser.harness import log_in
from tests.browser.test_content_security_policy import watched

pytestmark = pytest.mark.browser


def test_the_docs_page_works_offline_and_tries_an_operation(open_page, server):
    page, violations = watched(open_page)
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    log_in(page, server)

    response = page.goto(f"{server.base_url}/api/docs")
    assert response.status == 200
    page.locator(".opblock").first.wait_for()
    page.wait_for_load_state("networkidle")

    summaries = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/commands" in summaries and "/api/approvals/{approval_id}/decide" in summaries
    scripts = page.eval_on_selector_all("script[src]", "els => els.map(e => e.src)")
    assert scripts and all(src.startswith(f"{server.base_url}/static/") for src in scripts), scripts
    origin = urlsplit(server.base_url).netloc
    assert {urlsplit(url).netloc for url in requested if url.startswith("http")} == {origin}, requested

    runs = page.locator(".opblock-get", has=page.locator(".opblock-summary-path", has_text="/api/runs")).first
    runs.locator(".opblock-summary").click()
    runs.get_by_role("button", name="Try it out").click()
    runs.get_by_role("button", name="Execute").click()
    status = runs.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip() == "200"
    assert violations == []
