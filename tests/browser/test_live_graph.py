"""A big run's routing graph in a real browser: live updates only mark it
stale, and the page fetches it (the harness's server counts runs of more
than two steps as big: ZENWEB_LIVE_GRAPH_STEPS=2)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import log_in

pytestmark = pytest.mark.browser

# A running run of three steps that no worker touches (no task was queued):
# only the events this test writes move it.
CREATE_RUN = """
from django.contrib.auth.models import User
from django.utils import timezone
from runs.models import Run, Step, Workflow
run = Run.objects.create(
    workflow=Workflow.objects.filter(name="hub_and_spoke").latest("version"),
    created_by=User.objects.get(username="admin"), status="running", started=timezone.now(),
)
for position, step_id in enumerate(["coordinator", "first", "second"]):
    Step.objects.create(
        run=run, step_id=step_id, kind="coordinator" if position == 0 else "step",
        agent="coordinator" if position == 0 else "researcher", position=position, status="running",
    )
print(run.pk)
"""

FINISH_FIRST = """
from django.db import transaction
from agents.events import Event
from runs.models import Step
from runs.store.unit_of_work import UnitPerEventSink
from runs.store.sql import store
with transaction.atomic():
    store().lock_run({run})
    Step.objects.filter(run_id={run}, step_id="first").update(status="completed")
    UnitPerEventSink({run}).emit(Event("step_end", "first", {{"status": "completed", "output": "done"}}))
"""


def test_it_fetches_a_big_runs_stale_graph_itself(open_page, server):
    run = int(server.shell(CREATE_RUN).strip())
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    first = page.locator('#routing-graph [data-node="first"]')
    assert first.get_attribute("data-status") == "running"

    # Written by another process: the page's socket finds it at its next poll.
    with page.expect_request(lambda request: request.url.endswith(f"/runs/{run}/graph/"), timeout=15_000):
        server.shell(FINISH_FIRST.format(run=run))

    expect(first).to_have_attribute("data-status", "completed", timeout=10_000)
    # The update itself carried only the stale mark, which the graph now matches.
    assert page.locator("#graph-stale").get_attribute("data-seq") == "1"
    expect(page.locator("#routing-graph")).to_have_attribute("data-seq", "1")
    assert page.locator('#step-first [data-status="completed"]').count() == 1


def test_a_redrawn_graph_keeps_the_node_a_person_picked(open_page, server):
    run = int(server.shell(CREATE_RUN).strip())
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    page.locator('#routing-graph [data-node="second"]').click()
    expect(page).to_have_url(re.compile(rf"/runs/{run}/\?step=second$"))

    with page.expect_request(lambda request: request.url.endswith(f"/runs/{run}/graph/"), timeout=15_000):
        server.shell(FINISH_FIRST.format(run=run))

    # The card was swapped for a new one and drawn again: the pick is kept.
    expect(page.locator('#routing-graph [data-node="first"]')).to_have_attribute("data-status", "completed")
    expect(page.locator('#routing-graph [data-node="second"]')).to_have_class(re.compile(r"\brg-picked\b"))
    assert page.locator("#routing-graph .rg-picked").count() == 1
