"""A command's page follows its run live: it reads `running` while the run is
under way and turns to the final answer when the run ends, without a reload.

One `manage.py serve` (embedded) serves the module; Debian's chromium drives it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import log_in

pytestmark = pytest.mark.browser

# About four seconds of work: long enough to open the command's page while it runs.
SLOW = """\
name: slow_echo
description: Say the subject back, slowly.
triggers: [slowly]
inputs:
  subject: {type: string, required: true}
agents:
  echoer:
    description: echoer agent
    script:
      - {delay: 4, say: "slow echo: $subject"}
steps:
  - id: echo
    agent: echoer
"""


@pytest.fixture(scope="module")
def registered(server):
    server.shell(f"from runs.actions import do_register_workflow; do_register_workflow({SLOW!r}, 'slow_echo.yaml')")


def test_the_command_page_follows_its_run_to_its_final_answer(open_page, server, registered):
    page = open_page()
    log_in(page, server, user="viewer")
    page.goto(f"{server.base_url}/")
    page.fill("form.command-form input[name=command]", "slowly for tides")
    page.click("form.command-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))

    page.click("#run-governance a[href^='/commands/']")
    page.wait_for_url(re.compile(r".*/commands/\d+/$"))
    expect(page.locator("#command-status")).to_have_text("running")
    page.evaluate("window.__zenwebMarker = 1")

    expect(page.locator("#command-status")).to_have_text("success", timeout=20_000)
    assert page.evaluate("window.__zenwebMarker") == 1  # no reload
    assert page.locator("#command-run-status").inner_text() == "completed"
    assert "**Result:** SUCCESS" in page.locator("#markdown").text_content()
