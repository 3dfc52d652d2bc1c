"""A person's first visit in Chromium at 1280x800: the runs page says what
to do next on its first screen; "Watch a demo" opens a run that moves while
they look (a step starts, a search runs, the coordinator forwards a message,
the run ends); the start form chooses no workflow and refuses a
destructive one until its tick; a long result is collapsed to its first
lines with "show all".

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import log_in, page_width, screenshot, step_status, wait_until_finished

pytestmark = pytest.mark.browser

SCREEN = {"width": 1280, "height": 800}
# The demo's script waits about 25 s in all (runs/demo/watch_demo.yaml).
DEMO_TIMEOUT_MS = 90_000


def test_the_first_screen_says_what_to_do_and_a_demo_moves_live(open_page, server):
    page = open_page(viewport=SCREEN)
    log_in(page, server, user="viewer")

    first = page.locator("#first-screen")
    expect(first).to_be_in_viewport()
    expect(first).to_contain_text("Watch a demo")
    expect(first).to_contain_text("Type a command")
    expect(first).to_contain_text("Destructive work waits for an approver")
    assert page.locator("#first-screen a[href='/approvals/']").count() == 0  # a viewer may not open the queue
    screenshot(page, "first-screen")

    page.click("#watch-demo")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    # Seen as it happens on the open page, not found at its end.
    page.wait_for_function("() => document.querySelector('#step-search .status')?.dataset.status === 'running'")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "running")
    event = "#event-list details.event[data-type={}][data-step={}]"
    page.wait_for_selector(event.format("tool_call", "search"))
    # The tip the coordinator forwarded, read by the writer as it starts.
    page.wait_for_selector(event.format("agent_inbox_drain", "write"), timeout=DEMO_TIMEOUT_MS)
    rows = wait_until_finished(page, timeout_ms=DEMO_TIMEOUT_MS)

    assert [row["type"] for row in rows].count("step_start") == 3
    assert {step_status(page, step) for step in ("search", "prices", "write")} == {"completed"}


def test_the_start_form_refuses_a_destructive_workflow_without_its_tick(open_page, server):
    page = open_page(viewport=SCREEN)
    log_in(page, server)
    select = page.locator("form.start-form select[name=workflow]")
    labels = select.locator("option").all_inner_texts()
    assert select.input_value() == "" and labels[0] == "choose a workflow…"
    assert any(re.fullmatch(r"cleanup_workspace v\d+ · destructive, needs approval", label) for label in labels)

    page.click("form.start-form button[type=submit]")  # nothing chosen: the browser asks for a choice
    expect(page).to_have_url(f"{server.base_url}/")

    select.select_option(label=next(label for label in labels if label.startswith("cleanup_workspace")))
    plan = page.locator("form.start-form fieldset.destructive-confirm:not([hidden])")
    expect(plan).to_contain_text("rm -rf -- build")
    page.click("form.start-form button[type=submit]")
    expect(page).to_have_url(f"{server.base_url}/")
    assert plan.locator("input[name=confirm]").evaluate("box => !box.validity.valid")

    plan.locator("input[name=confirm]").check()
    page.click("form.start-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    page.wait_for_selector("#run-status[data-status=awaiting_approval]")


def test_a_long_result_is_collapsed_to_its_first_lines(open_page, server):
    run_id = server.demo_url.rstrip("/").rsplit("/", 1)[1]
    page = open_page(viewport=SCREEN)
    log_in(page, server)
    page.goto(server.demo_url)
    wait_until_finished(page)
    lines = "\\n".join(f"step-{n}: done" for n in range(40))
    server.shell(f"from runs.models import Run; Run.objects.filter(pk={run_id}).update(result='{lines}')")

    page.reload()
    collapsed = page.locator("#run-header .run-result").bounding_box()
    expect(page.locator("#run-result-all .show-all")).to_have_text("show all (40 lines)")
    expect(page.get_by_text("step-39: done")).to_be_hidden()
    assert collapsed["height"] < 200, f"the collapsed result is {collapsed['height']}px high"

    screenshot(page, "run-result-collapsed")

    page.click("#run-result-all .show-all")
    expect(page.get_by_text("step-39: done")).to_be_visible()
    expect(page.locator("#run-result-all .show-less")).to_be_visible()

    page.set_viewport_size({"width": 600, "height": 900})
    page.reload()
    assert page_width(page) <= 600, "the run page scrolls sideways at 600 px with a collapsed result"
