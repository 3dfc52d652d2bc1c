"""A person's first visit: the runs page says what to do next, "Watch a
demo" starts a paced run, the start form has no destructive default and
starts a destructive workflow only with its tick, a long result is
collapsed, the overhead figure says what it measures."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from agents.spec import parse_workflow
from runs.actions import do_create_run, do_load_catalog
from runs.demo import WORKFLOW_FILE
from runs.models import Run, Workflow
from tests.conftest import event_types, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_runs_page_says_what_to_do_next(client, owner):
    client.force_login(owner)

    html = client.get("/").content.decode()

    first = html.index('id="first-screen"')
    assert first < html.index('id="command"') < html.index('id="start"')
    assert 'action="/runs/demo/"' in html and ">Watch a demo</button>" in html
    assert "Destructive work waits for an approver" in html


def test_an_approver_is_told_how_many_approvals_wait(client, approver, owner):
    do_load_catalog(settings.ZENWEB_CATALOG_DIR)
    do_create_run(Workflow.objects.get(name="cleanup_workspace"), {}, user=owner)
    client.force_login(approver)

    html = client.get("/").content.decode()

    assert re.search(r'id="approvals-waiting">1 approval waiting for a decision</a>', html)


def test_watch_a_demo_starts_a_paced_run_offered_nowhere_else(client, owner):
    client.force_login(owner)

    response = client.post("/runs/demo/")
    again = client.post("/runs/demo/")

    run = Run.objects.order_by("pk").first()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert again.status_code == 302
    # One stored version however many demos start, and not offered to start by hand.
    assert Workflow.objects.filter(name="watch_demo").count() == 1
    page = client.get("/").content.decode()
    assert "watch_demo v" not in page
    assert run.command == "Watch a demo" and run.created_by == owner


def test_the_demo_lasts_long_enough_to_watch():
    """Its pace is its script's: the longest chain of its steps' turns
    waits 20-40 s in all, whatever the provider does."""
    spec = parse_workflow(WORKFLOW_FILE.read_text(), str(WORKFLOW_FILE))
    waits = {step.id: sum(turn.delay for turn in spec.agents[step.agent].script) for step in spec.steps}
    longest = max(waits[d] for d in ["search", "prices"]) + waits["write"]

    assert spec.steps[2].depends_on == ["search", "prices"]
    assert 20 <= longest <= 40, longest


def test_the_demo_run_shows_steps_a_tool_call_and_a_forwarded_message(celery_worker, owner, monkeypatch):
    from agents.llm import scripted

    monkeypatch.setattr(scripted, "time", type("NoWait", (), {"sleep": staticmethod(lambda seconds: None)}))
    from runs.demo import do_start_demo

    run = wait_for_run(do_start_demo(owner))

    assert run.status == "completed"
    types = event_types(run)
    assert types.count("step_start") == 3
    assert "tool_call" in event_types(run, step_id="search")
    assert run.messages.filter(sender="coordinator", recipient="write").exists()


def test_the_start_form_chooses_no_workflow_and_marks_the_destructive_ones(client, owner):
    do_load_catalog(settings.ZENWEB_CATALOG_DIR)
    client.force_login(owner)

    html = client.get("/").content.decode()

    form = html[html.index('class="start-form"') :]
    assert '<option value="" selected disabled>choose a workflow…</option>' in form
    assert re.search(r"cleanup_workspace v\d+ · destructive, needs approval</option>", form)
    assert not re.search(r"hub_and_spoke v\d+ · destructive", form)
    assert "rm -rf -- build" in form and 'name="confirm"' in form


def test_a_destructive_workflow_starts_only_with_its_tick(client, owner):
    do_load_catalog(settings.ZENWEB_CATALOG_DIR)
    cleanup = Workflow.objects.get(name="cleanup_workspace")
    client.force_login(owner)

    refused = client.post("/runs/start/", {"workflow": cleanup.pk, "inputs": ""}, follow=True)
    started = client.post("/runs/start/", {"workflow": cleanup.pk, "inputs": "", "confirm": str(cleanup.pk)})

    assert "cleanup_workspace is destructive: tick" in refused.content.decode()
    run = Run.objects.get()
    assert started["Location"] == f"/runs/{run.pk}/"
    assert run.status == "awaiting_approval"


def test_a_long_result_is_collapsed_to_its_first_lines(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tea"}, user=owner))
    run.result = "\n".join(f"step-{n}: done" for n in range(40))
    run.save()
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    head = html[html.index('<pre class="result-head">') :]
    assert head.startswith('<pre class="result-head">step-0: done\n') and "step-5: done…</pre>" in head
    assert "show all (40 lines)" in html
    assert html.count("step-39: done") == 1  # in the whole result, behind "show all"


def test_the_overhead_figure_says_what_it_measures(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tea"}, user=owner))
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    title = re.search(r'id="coordination-overhead" title="([^"]*)"', html).group(1)
    assert "share of this run" in title and "on a small run" in title
    assert "typical" in title and "10-15%" not in title
