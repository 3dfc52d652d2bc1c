"""The run page in a real browser: live updates over the websocket, catching
up after a reconnect, and a layout that fits a phone.

One `manage.py serve` (embedded: SQLite in a temporary directory, in-process
worker, demo run) serves the whole module; Debian's chromium drives it.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from agents.events.groups import types_in
from tests.browser.harness import (
    SOCKET_SPY,
    assert_gapless,
    assert_in_order,
    event_rows,
    log_in,
    overflowing,
    page_width,
    start_run_from_list,
    status,
    step_status,
    wait_until_finished,
)

pytestmark = pytest.mark.browser

# -- tests ---------------------------------------------------------------------------------


def test_it_shows_the_demo_run_live_without_reloading(open_page, server):
    page = open_page()
    log_in(page, server, next_path=urlsplit(server.demo_url).path)
    page.evaluate("window.__zenwebMarker = 1")
    first_status, first_rows = status(page), event_rows(page)
    assert first_status in ("pending", "running"), (
        f"the demo run was already {first_status} when its page opened, so nothing could arrive live"
    )
    writer_node = page.locator('#routing-graph [data-node="writer"]')
    first_writer = writer_node.get_attribute("data-status") if writer_node.count() else None

    rows = wait_until_finished(page)

    assert page.evaluate("window.__zenwebMarker") == 1, "the page reloaded"
    assert len(rows) > len(first_rows), "no event arrived over the websocket"
    assert_gapless(rows)
    assert_in_order(
        rows,
        ["workflow_start", "coordinator_message", "coordinator_narration", "coordinator_synthesis", "workflow_end"],
    )
    assert rows[-1]["type"] == "workflow_end"
    assert [row["type"] for row in rows].count("workflow_end") == 1
    for step_id in ("research", "check_prices", "writer"):
        assert step_status(page, step_id) == "completed", step_id
        assert page.locator(f"#step-{step_id} .status").inner_text().strip() == "completed"
    # The routing graph followed along: the writer went from waiting to done,
    # and the forward through the coordinator is drawn with its count.
    assert first_writer != "completed"
    assert writer_node.get_attribute("data-status") == "completed"
    forward = page.locator('#routing-graph .rg-edge[data-source="coordinator"][data-target="writer"]')
    assert forward.get_attribute("data-count") == "1"


def test_it_catches_up_after_the_socket_reconnects(open_page, server):
    page = open_page(init_script=SOCKET_SPY)
    log_in(page, server)
    start_run_from_list(page, server)
    sockets = "window.__zenwebSockets"
    first_after = int(parse_qs(urlsplit(page.evaluate(f"{sockets}[0].url")).query)["after"][0])
    # Drop the socket only once it has delivered an event live, so the cursor
    # the reconnect must use is not the one the page was rendered with.
    page.wait_for_function(f"() => {sockets}[0].messages.some(m => m.seqs.length)")
    assert status(page) in ("pending", "running"), "the run finished before the socket could be dropped"

    dropped_at = page.evaluate("window.__zenwebDropSocket(1000)")
    assert dropped_at > first_after
    page.wait_for_function(f"() => {sockets}.length === 2 && {sockets}[1].openedAt !== null")
    rows = wait_until_finished(page)

    records = page.evaluate(f"{sockets}.map(({{url, messages}}) => ({{url, messages}}))")
    assert len(records) == 2, [r["url"] for r in records]
    assert parse_qs(urlsplit(records[1]["url"]).query)["after"] == [str(dropped_at)], (
        f"the reconnect did not resume from the last event on the page ({dropped_at}): {records[1]['url']}"
    )
    before = [seq for message in records[0]["messages"] for seq in message["seqs"]]
    after = [seq for message in records[1]["messages"] for seq in message["seqs"]]
    assert before and max(before) == dropped_at
    assert after and after[0] == dropped_at + 1, f"the new socket started at {after[:1]}, not {dropped_at + 1}"
    assert_gapless(rows)
    assert rows[-1]["type"] == "workflow_end"
    assert page.evaluate("window.__zenwebSockets.length") == 2


def test_it_cancels_a_run_from_a_live_updated_header(open_page, server):
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server)
    rendered = len(event_rows(page))
    # Every live update replaces the header, Cancel button included.
    page.wait_for_function(f"() => document.querySelectorAll('#event-list details.event').length > {rendered}")
    assert status(page) in ("pending", "running"), "the run finished before it could be cancelled"

    page.once("dialog", lambda dialog: dialog.accept())  # Cancel asks first
    page.click("#run-header button.danger")

    try:
        rows = wait_until_finished(page, expected="cancelled", timeout_ms=10_000)
    except PlaywrightTimeoutError:
        pytest.fail(f"the run did not show as cancelled; the browser is at {page.url}: {page.title()!r}")
    assert_gapless(rows)


def test_it_appends_only_the_live_events_the_filter_lets_through(open_page, server):
    page = open_page()
    log_in(page, server)
    start_run_from_list(page, server)
    shown = set(types_in(["lifecycle"]))

    with page.expect_response(lambda r: "/events/" in r.url):
        page.click("#event-filters label.chip:has(input[value=lifecycle])")
    assert status(page) in ("pending", "running"), "the run finished before the filter was applied"
    filtered_at = len(event_rows(page))
    rows = wait_until_finished(page)

    assert len(rows) > filtered_at, "no event arrived live under the filter"
    assert {row["type"] for row in rows} <= shown, [row["type"] for row in rows]
    seqs = [row["seq"] for row in rows]
    assert seqs == sorted(set(seqs)), f"events out of order or shown twice: {seqs}"
    # The cursor moved past the events the filter hid, up to the run's last.
    assert page.locator("#last-seq").get_attribute("data-seq") == str(rows[-1]["seq"])
    assert page.locator("#event-list .no-events").count() == 0


def test_the_start_forms_inputs_hint_follows_the_chosen_workflow(open_page, server):
    page = open_page()
    log_in(page, server)
    select = page.locator("form.start-form select[name=workflow]")
    inputs = page.locator("form.start-form textarea[name=inputs]")
    labels = select.locator("option").all_inner_texts()

    select.select_option(label=next(text for text in labels if text.startswith("research v")))
    research = inputs.get_attribute("placeholder")
    select.select_option(label=next(text for text in labels if text.startswith("code_edit v")))
    code_edit = inputs.get_attribute("placeholder")

    assert research == "query=<What to research.> (required)"
    assert code_edit == "path=<The file to write, inside the workspace.> (required)\ntext=hello from zenweb"


def test_it_keeps_a_long_input_inside_the_run_header_on_a_phone(open_page, server):
    page = open_page(viewport={"width": 390, "height": 844})
    log_in(page, server)
    page.goto(f"{server.base_url}/")
    select = page.locator("form.start-form select[name=workflow]")
    labels = select.locator("option").all_inner_texts()
    select.select_option(label=next(text for text in labels if text.startswith("loop_review")))
    page.fill("form.start-form textarea[name=inputs]", "topic=" + "long" * 2_500)
    page.click("form.start-form button[type=submit]")
    page.wait_for_selector("#run-inputs")

    assert page_width(page) <= 392, f"the run page scrolls sideways: {overflowing(page, 390)}"
    # Read in one go: a live update may replace the header between two reads.
    box = page.evaluate(
        "() => { const r = document.querySelector('#run-inputs').getBoundingClientRect();"
        " return {x: r.x, width: r.width, height: r.height}; }"
    )
    # Wrapped inside the card (not cut off past its edge), a few lines high.
    assert box["x"] + box["width"] <= 390, f"the inputs run {box['width']}px wide, past the screen"
    assert box["height"] < 200, f"the inputs take {box['height']}px of the header"


def test_it_fits_a_phone_screen(open_page, server):
    """No sideways scrolling at 390 px; screenshots of both widths for a human
    to look at (/tmp/zenweb-phone.png, /tmp/zenweb-desktop.png)."""
    run_path = urlsplit(server.demo_url).path
    widths = {}
    for name, width in (("phone", 390), ("desktop", 1280)):
        page = open_page(viewport={"width": width, "height": 844 if name == "phone" else 800})
        log_in(page, server, next_path=run_path)
        wait_until_finished(page)
        page.screenshot(path=f"/tmp/zenweb-{name}.png", full_page=True)
        widths[name] = (width, page_width(page), overflowing(page, width))

    for name, (width, scroll_width, culprits) in widths.items():
        assert scroll_width <= width + 2, (
            f"the run page scrolls sideways at {width}px ({name}): {scroll_width}px wide; widest: {culprits}"
        )


def _clipped(page, table: str) -> list[str]:
    """Header cells of ``table`` that end past the right edge of its card (a
    card scrolls sideways rather than widen the page, which hides them)."""
    return page.evaluate(
        """(selector) => {
            const table = document.querySelector(selector);
            const card = table.closest('.card').getBoundingClientRect();
            return [...table.querySelectorAll('th')]
                .filter((th) => th.getBoundingClientRect().right > card.right + 1)
                .map((th) => th.textContent.trim());
        }""",
        table,
    )


def test_it_shows_every_column_of_the_steps_without_scrolling_a_card(open_page, server):
    run_path = urlsplit(server.demo_url).path
    desktop = open_page(viewport={"width": 1280, "height": 800})
    log_in(desktop, server, next_path=run_path)
    wait_until_finished(desktop)
    assert _clipped(desktop, "#step-list") == []

    phone = open_page(viewport={"width": 600, "height": 900})
    log_in(phone, server, next_path=f"{run_path}replay/")
    phone.wait_for_selector(".replay-detail table")
    assert _clipped(phone, ".replay-detail table") == []
