"""Resume: a running run whose queued work was lost gets going again."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from runs import live
from runs.actions.recovery import do_resume_run
from runs.models import Run, Step
from runs.store.unit_of_work import UnitPerEventSink
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def lost_run(owner) -> Run:
    """A run as a dead worker leaves it: running, its step's turn never taken."""
    workflow = register("relay")
    run = Run.objects.create(
        workflow=workflow, inputs={"subject": "tea"}, created_by=owner, status="running", started=timezone.now()
    )
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    Step.objects.create(run=run, step_id="first", agent="sender", status="running", position=1, started=timezone.now())
    Step.objects.create(run=run, step_id="second", agent="receiver", position=2, depends_on=["first"])
    return run


def test_it_resumes_a_run_whose_turn_was_lost(celery_worker, client, owner):
    run = lost_run(owner)
    client.force_login(owner)

    client.post(f"/runs/{run.pk}/resume/")

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert run.events.filter(type="run_resumed", data__steps=["first"]).exists()


def test_it_leaves_a_finished_run_alone(celery_worker, owner):
    run = lost_run(owner)
    Run.objects.filter(pk=run.pk).update(status="completed")

    assert do_resume_run(run.pk, "test") == []
    assert not run.events.exists()


def test_it_refuses_to_resume_someone_elses_run(celery_worker, client, owner, teammate):
    run = lost_run(owner)
    client.force_login(teammate)

    assert client.post(f"/runs/{run.pk}/resume/").status_code == 404


def test_it_resumes_from_a_header_a_live_update_redrew(celery_worker, owner):
    """The header a websocket push draws is rendered without a request (no
    CSRF token, no person): it holds only the place of Resume, and the page
    keeps the button it was drawn with, which must still get through."""
    run = lost_run(owner)
    UnitPerEventSink(run.pk).emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": "still here"}))
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    page_headers = json.loads(html.unescape(re.search(r"<body hx-headers='([^']*)'", page).group(1)))

    update, _ = live.render_update(run.pk, 0)
    assert '<span id="run-resume" hx-preserve></span>' in update and "/resume/" not in update
    form = re.search(r'<form method="post" action="/runs/\d+/resume/"[^>]*>.*?</form>', page, re.S).group(0)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    # As the browser sends it: with htmx (and the page's headers) if the form
    # asks for it, else as a plain form post.
    if hx_post := re.search(r'hx-post="([^"]+)"', form):
        headers = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in page_headers.items()}
        response = browser.post(hx_post.group(1), fields, HTTP_HX_REQUEST="true", **headers)
    else:
        response = browser.post(re.search(r'action="([^"]+)"', form).group(1), fields)

    assert response.status_code == 200, response.content.decode()[:300]
    assert response.headers["HX-Refresh"] == "true"
    assert run.events.filter(type="run_resumed").exists()
