"""The run page's layout in Chromium at 1280x800, 900x800 and 600x900,
measured, not looked at: the page never scrolls sideways, no element sticks
out of its container (one that scrolls its own content sideways may hold
wider ones), and no status, badge or id breaks inside a word. Also the
favicon.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import re

import pytest

from tests.browser.harness import ROOT, log_in, screenshot, start_run_from_list, wait_until_finished

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (900, 800), (600, 900)]
BUSY = ROOT / "tests" / "workflows" / "browser" / "busy.yaml"

# Elements past their container's right (or left) edge, where that
# container does not scroll (or clip) sideways: [element, its right, the container's].
STICKING_OUT = """() => {
  const describe = (e) => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}`
    + `${typeof e.className === "string" && e.className ? "." + e.className.trim().split(/\\s+/).join(".") : ""}`;
  const scrolls = (e) => ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(e).overflowX);
  const out = [];
  for (const e of document.querySelectorAll("main *")) {
    if (e.closest("svg") && e.tagName.toLowerCase() !== "svg") continue;
    const box = e.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    let parent = e.parentElement;
    while (parent && getComputedStyle(parent).display === "contents") parent = parent.parentElement;
    if (!parent) continue;
    const holder = parent.getBoundingClientRect();
    if (scrolls(parent)) continue;
    if (box.right > holder.right + 1 || box.left < holder.left - 1)
      out.push([describe(e), Math.round(box.left), Math.round(box.right),
                describe(parent), Math.round(holder.left), Math.round(holder.right)]);
  }
  return out.slice(0, 15);
}"""

# Statuses, badges and ids (no space in them) that break inside a word: an id
# may wrap after a separator (id_breaks puts a <wbr> there, so each piece is
# a text node of its own), never inside one of its pieces.
BROKEN_WORDS = """(selectors) => {
  const out = [];
  for (const e of document.querySelectorAll(selectors)) {
    const text = e.textContent.trim();
    if (!text || /\\s/.test(text) || !e.getClientRects().length) continue;
    const pieces = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
    for (let node = pieces.nextNode(); node; node = pieces.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (tops.size > 1) { out.push(text); break; }
    }
  }
  return out;
}"""
WORDS = ", ".join(
    [
        "main .status",
        "main .badge",
        "#step-list .step-id",
        "#step-list .agent-name",
        "#step-list .worker-id",
        "#event-list .estep",
        "#tool-calls .step-id",
        "#tool-calls .tool-name",
        ".run-approvals code",
    ]
)


def send_command(page, server, text: str) -> None:
    page.goto(f"{server.base_url}/")
    page.fill("form.command-form input[name=command]", text)
    page.click("form.command-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))


@pytest.fixture(scope="module")
def runs(server, browser) -> dict[str, str]:
    """A run of each kind the page draws differently: its path."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    log_in(page, server, user="viewer")
    paths = {}
    for name, command in (
        ("waiting", "Run cleanup workspace workflow"),
        ("regions", "Run regions_foreach for regions eu, us, asia and africa"),
        ("research", "Run research workflow for laptops under $1000"),
    ):
        send_command(page, server, command)
        if name != "waiting":
            wait_until_finished(page)
        paths[name] = page.url.removeprefix(server.base_url)
    # Forty-one steps, still running while the page is measured: workers' ids in the agent column.
    server.shell(
        "from runs.actions import do_register_workflow; "
        f"do_register_workflow(open({str(BUSY)!r}).read(), {str(BUSY)!r})"
    )
    start_run_from_list(page, server, workflow="busy")
    paths["busy"] = page.url.removeprefix(server.base_url)
    context.close()
    return paths


@pytest.mark.parametrize(("width", "height"), SIZES)
@pytest.mark.parametrize("kind", ["waiting", "regions", "research", "busy"])
def test_the_run_page_fits_its_width_and_breaks_no_word(open_page, server, runs, kind, width, height):
    page = open_page(viewport={"width": width, "height": height})
    log_in(page, server, next_path=runs[kind], user="viewer")
    page.wait_for_selector("#connection[data-state=live]")

    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    sticking_out = page.evaluate(STICKING_OUT)
    broken = page.evaluate(BROKEN_WORDS, WORDS)
    screenshot(page, f"run-page-{kind}-{width}")

    assert scroll_width <= width, f"the page scrolls sideways: {scroll_width}px wide at {width}px"
    assert sticking_out == [], f"past their container ([element, left, right, container, left, right]): {sticking_out}"
    assert broken == [], f"broken inside a word: {broken}"


def test_the_favicon_is_there(open_page, server):
    page = open_page()
    response = page.goto(f"{server.base_url}/favicon.ico")

    assert response.status == 200 and response.headers["content-type"].startswith("image/svg+xml")
    assert response.url.endswith("/static/favicon.svg")
