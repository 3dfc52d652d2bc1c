"""The run page as a person uses it while a busy run redraws it several times
a second: the Cancel button keeps its focus and takes a press, what they
opened stays open; and long unbroken text stays inside its cards.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it.
"""

from __future__ import annotations

import pytest

from tests.browser.harness import ROOT, log_in, start_run_from_list, status, wait_until_finished

pytestmark = pytest.mark.browser

WORKFLOWS = ROOT / "tests" / "workflows" / "browser"

# Counts the live redraws of the header, the tool calls and the steps' rows.
REDRAWS = """() => {
  window.__redraws = {header: 0, tools: 0, rows: 0};
  new MutationObserver((changes) => {
    for (const change of changes) for (const node of change.addedNodes) {
      if (node.id === "run-header") window.__redraws.header++;
      if (node.id === "tool-calls") window.__redraws.tools++;
      if (node.tagName === "TBODY" && node.classList.contains("step")) window.__redraws.rows++;
    }
  }).observe(document.body, {childList: true, subtree: true});
}"""


@pytest.fixture(scope="module")
def registered(server):
    for name in ("busy", "long_text"):
        path = WORKFLOWS / f"{name}.yaml"
        server.shell(
            "from runs.actions import do_register_workflow; "
            f"do_register_workflow(open({str(path)!r}).read(), {str(path)!r})"
        )


def redraws(page) -> dict:
    return page.evaluate("window.__redraws")


def test_a_busy_runs_cancel_button_keeps_its_focus_and_takes_a_key_press(open_page, server, registered):
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server, workflow="busy")
    page.evaluate(REDRAWS)
    cancel = page.locator("#run-header button.danger")
    cancel.focus()

    page.wait_for_function("() => window.__redraws.header >= 3")  # the header redrawn under the focus

    assert page.evaluate("document.activeElement.textContent") == "Cancel run"
    page.once("dialog", lambda dialog: dialog.accept())  # Cancel asks first
    page.keyboard.press("Enter")
    page.wait_for_selector("#run-status[data-status=cancelled]", timeout=10_000)


def test_what_a_person_opened_stays_open_while_live_updates_redraw_it(open_page, server, registered):
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server, workflow="busy")
    page.wait_for_selector("#tool-calls tbody tr details summary")
    page.evaluate(REDRAWS)
    page.locator("#tool-calls tbody tr details").first.locator("summary").click()
    page.locator("#step-coordinator .step-transcript details summary").click()

    page.wait_for_function("() => window.__redraws.tools >= 2 && window.__redraws.rows >= 2")

    assert page.locator("#tool-calls tbody tr details").first.get_attribute("open") is not None
    assert page.locator("#step-coordinator .step-transcript details").get_attribute("open") is not None
    assert status(page) == "running"
    # Forty-one steps scroll inside their card: what is below stays near.
    card, viewport = page.evaluate("[document.querySelector('.steps-card').offsetHeight, window.innerHeight]")
    assert card <= 0.85 * viewport + 1


# On a phone the steps' six columns and the tool calls' five may scroll a
# little inside their card (no status or id breaks inside a word); what must
# not is text that widens a table to thousands of pixels, or the page.
@pytest.mark.parametrize(
    ("width", "tables", "scrolling"),
    [(1280, ["#step-list", ".claims", ".tool-calls"], []), (390, [".claims"], [".tool-calls"])],
)
def test_long_unbroken_text_stays_inside_its_cards(open_page, server, registered, width, tables, scrolling):
    page = open_page(viewport={"width": width, "height": 900})
    log_in(page, server)
    start_run_from_list(page, server, workflow="long_text")
    wait_until_finished(page)

    sizes = page.evaluate(
        """(tables) => tables.map((selector) => {
            const table = document.querySelector(selector);
            const card = table.closest(".card");
            return [selector, Math.round(table.getBoundingClientRect().width), card.clientWidth];
        })""",
        tables + scrolling,
    )
    wider = [size for size in sizes if size[0] in tables and size[1] > size[2]]
    assert wider == [], f"tables wider than their cards ([table, its width, the card's]): {wider}"
    far = [size for size in sizes if size[0] in scrolling and size[1] > 1.5 * size[2]]
    assert far == [], f"tables far wider than their cards ([table, its width, the card's]): {far}"
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 2, "the page scrolls sideways"
    link, card = page.evaluate(
        "() => [document.querySelector('.claims td a').getBoundingClientRect().x,"
        " document.querySelector('.claims').closest('.card').getBoundingClientRect().right]"
    )
    assert link < card, "the claim's source link starts past its card's right edge"


def test_a_big_routing_graph_on_a_phone_keeps_its_labels_legible_and_scrolls_in_its_card(open_page, server, registered):
    # Forty-one nodes: shrunk to a phone's width, their labels were 5 px tall.
    page = open_page(viewport={"width": 390, "height": 844})
    log_in(page, server)
    start_run_from_list(page, server, workflow="busy")
    wait_until_finished(page, timeout_ms=60_000)

    smallest, graph, card, page_width = page.evaluate(
        """() => {
            const svg = document.querySelector('#routing-graph svg.routing');
            const heights = [...svg.querySelectorAll('text')].map((t) => t.getBoundingClientRect().height);
            return [Math.min(...heights.filter((h) => h > 0)), svg.getBoundingClientRect().width,
                    svg.closest('.card').clientWidth, document.documentElement.scrollWidth];
        }"""
    )
    assert smallest >= 9, f"the smallest label is {smallest} px tall"
    assert graph > card and page_width <= 392  # the card scrolls sideways, not the page
