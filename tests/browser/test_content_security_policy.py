"""The dashboard under its Content-Security-Policy: no inline script or
style, no eval. Each main page loads without a single violation reported,
and what htmx does on them (live updates over the websocket, polling the
approvals queue and a stale graph) still works."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from tests.browser.harness import event_rows, log_in, start_run_from_list, status, wait_until_finished

pytestmark = pytest.mark.browser

# The browser reports a violation as a console error and as an event; the
# event is echoed to the console too, so neither way goes unseen.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) =>
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.lineNumber}`)
);
"""


def watched(open_page):
    """A page and the CSP violations reported on it."""
    page = open_page(init_script=REPORT_VIOLATIONS)
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text or "CSP violation" in m.text else 0,
    )
    page.on("pageerror", lambda e: violations.append(f"page error: {e}"))
    return page, violations


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response.status == 200, url
    assert "script-src 'self'" in response.headers["content-security-policy"], url
    page.wait_for_load_state("networkidle")


def test_it_serves_the_main_pages_without_a_csp_violation(open_page, server):
    page, violations = watched(open_page)
    log_in(page, server)

    for path in ("/", "/catalog/", "/claims/", "/approvals/", urlsplit(server.demo_url).path, "/admin/"):
        visit(page, f"{server.base_url}{path}")
    # The research_brief demo run, with its price chart.
    research = re.search(r"demo run: (http://\S+/runs/\d+/) \(research_brief\)", server.log()).group(1)
    visit(page, research)
    page.locator(".artifact-chart").first.wait_for(state="attached")
    visit(page, f"{research}replay/")

    assert violations == []


def test_it_updates_a_run_page_live_under_the_policy(open_page, server):
    page, violations = watched(open_page)
    log_in(page, server)

    start_run_from_list(page, server)
    first = len(event_rows(page))
    assert status(page) in ("pending", "running")
    page.evaluate("window.__zenwebMarker = 1")
    rows = wait_until_finished(page)

    assert page.evaluate("window.__zenwebMarker") == 1, "the page reloaded"
    assert len(rows) > first, "no event arrived over the websocket"
    assert violations == []


def test_it_refreshes_the_approvals_queue_under_the_policy(open_page, server):
    approver, violations = watched(open_page)
    log_in(approver, server, next_path="/approvals/", user="approver")
    before = approver.locator("article.approval").count()

    asker = open_page()
    log_in(asker, server, user="viewer")
    asker.goto(f"{server.base_url}/")
    asker.fill("form.command-form input[name=command]", "Run cleanup workspace workflow")
    asker.click("form.command-form button[type=submit]")
    asker.wait_for_url(re.compile(r".*/runs/\d+/$"))

    # The queue polls every 2 s (runs/static/js/live.js): the request shows up without a reload.
    approver.wait_for_function(f"() => document.querySelectorAll('article.approval').length > {before}", timeout=10_000)
    assert violations == []


def test_it_refuses_and_reports_an_inline_script(open_page, server):
    # The check above would pass on a page with no policy at all: this one
    # shows the policy is enforced and that a violation is seen.
    page, violations = watched(open_page)
    log_in(page, server)

    page.evaluate(
        """() => {
          const script = document.createElement("script");
          script.textContent = "window.__inlineRan = true";
          document.head.appendChild(script);
          const div = document.createElement("div");
          div.setAttribute("onclick", "window.__handlerRan = true");
          document.body.appendChild(div);
          div.click();
        }"""
    )
    page.wait_for_timeout(200)

    assert page.evaluate("window.__inlineRan === undefined && window.__handlerRan === undefined")
    assert any("script-src" in v for v in violations), violations
