"""The dashboard pages, over HTTP."""

from __future__ import annotations

import re

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_renders_the_events_and_steps_of_a_finished_run(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tides"}, user=owner))
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()

    for step_id in ("coordinator", "first", "second"):
        assert f'id="step-{step_id}"' in page
    assert page.count('class="event type-') == run.events.count()
    assert 'data-status="completed"' in page
    assert "second says: second got: the subject is tides" in page
    assert f'ws-connect="/ws/runs/{run.pk}/?after={run.last_event_seq}&amp;caught_up=1"' in page


def test_it_shows_why_a_run_failed(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("broken_provider"), {}, user=owner))
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert 'data-status="failed"' in page
    assert "step fetch failed: model endpoint said: 503 upstream overloaded" in page


def test_it_escapes_agent_text(celery_worker, client, owner):
    run = wait_for_run(do_create_run(register("xss"), {}, user=owner))
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()

    assert "<script>window.__pwned" not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page


def test_it_lists_runs_with_progress(client, owner):
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=owner)
    client.force_login(owner)

    page = client.get("/").content.decode()

    assert f'href="/runs/{run.pk}/"' in page
    assert "relay" in page


def test_it_hides_other_peoples_runs(client, owner, teammate):
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=owner)
    client.force_login(teammate)

    hidden = client.get(f"/runs/{run.pk}/")
    assert hidden.status_code == 404
    assert f"There is nothing at <code>/runs/{run.pk}/</code>, or it is not yours to see." in hidden.content.decode()
    assert f'href="/runs/{run.pk}/"' not in client.get("/").content.decode()


def test_it_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    login = client.get(response["Location"]).content.decode()
    # Every link of the app's menu would only lead back here.
    assert "<nav>" not in login and 'href="/catalog/"' not in login


def test_it_starts_a_run_from_the_form_and_reports_bad_inputs(client, owner):
    workflow = register("relay")
    client.force_login(owner)

    response = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": ""}, follow=True)
    assert "missing required input &#x27;subject&#x27;" in response.content.decode()
    assert not Run.objects.exists()

    response = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "subject=tides"})
    run = Run.objects.get()
    assert response["Location"] == f"/runs/{run.pk}/"
    assert (run.inputs, run.created_by) == ({"subject": "tides"}, owner)


def test_it_refuses_a_run_input_past_its_size_cap(client, owner):
    workflow = register("relay")
    client.force_login(owner)

    response = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "subject=" + "x" * 60_000}, follow=True)

    assert "input &#x27;subject&#x27; is 60,000 characters; at most 10,000" in response.content.decode()
    assert not Run.objects.exists()


def test_it_refuses_an_input_given_twice(client, owner):
    workflow = register("relay")
    client.force_login(owner)

    response = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "subject=a\n\nsubject=b"}, follow=True)

    assert "inputs line 3: subject is given twice (first on line 1)" in response.content.decode()
    assert not Run.objects.exists()


def test_a_refused_start_shows_the_form_as_it_was_sent_once(client, owner):
    register("code_edit")
    relay = register("relay")
    client.force_login(owner)

    sent = {"workflow": relay.pk, "inputs": "subject=<b>tides</b>\nextra=1", "mode": "code"}
    page = client.post("/runs/start/", sent, follow=True).content.decode()

    assert f'<option value="{relay.pk}" data-inputs="subject=&lt;string&gt; (required)" selected>' in page
    assert ">subject=&lt;b&gt;tides&lt;/b&gt;\nextra=1</textarea>" in page
    assert '<option value="code" selected>code mode</option>' in page
    # Shown once: the next visit starts afresh.
    again = client.get("/").content.decode()
    assert " selected>" not in again.split('class="start-form"')[1].split("</form>")[0]
    assert "tides" not in again


@pytest.mark.parametrize("chosen", ["", "abc", "99999"])
def test_it_answers_a_start_for_no_such_workflow_without_an_error_page(client, owner, chosen):
    client.force_login(owner)

    response = client.post("/runs/start/", {"workflow": chosen, "inputs": ""}, follow=True)

    assert response.status_code == (404 if chosen.isdigit() else 200)
    if not chosen.isdigit():
        assert "workflow: expected a workflow&#x27;s id" in response.content.decode()
    assert not Run.objects.exists()


def test_it_starts_a_code_mode_workflow_from_the_form_only_in_code_mode(client, owner):
    workflow = register("code_edit")
    client.force_login(owner)

    response = client.post(
        "/runs/start/", {"workflow": workflow.pk, "inputs": "path=a.txt", "mode": "chat"}, follow=True
    )
    assert "code_edit workflow requires code mode - currently in chat mode" in response.content.decode()
    assert not Run.objects.exists()

    response = client.post("/runs/start/", {"workflow": workflow.pk, "inputs": "path=a.txt", "mode": "code"})
    run = Run.objects.get()
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.mode == "code"


def test_it_shows_the_catalog_of_workflows_and_tools(client, owner):
    register("relay")
    client.force_login(owner)

    page = client.get("/catalog/").content.decode()

    assert 'id="workflow-relay"' in page
    for tool in ("finalize", "forward_to_agent", "narrate", "send_message"):
        assert f'id="tool-zenweb.messaging.{tool}"' in page
    assert "SendMessageArgs" in page


def test_the_catalog_says_which_workflows_wait_for_approvals(client, owner):
    register("approvals/gated")
    register("cleanup_workspace")
    register("relay")
    client.force_login(owner)

    page = client.get("/catalog/").content.decode()

    def row(name: str) -> str:
        return re.search(rf'<tr id="workflow-{name}">.*?</tr>', page, re.S)[0]

    assert '<span class="badge warn">calls need approval: run_shell</span>' in row("gated")
    assert "destructive: needs approval" in row("cleanup_workspace")
    assert "approval" not in row("relay")


def test_it_hints_each_workflows_inputs_in_the_start_form(client, owner):
    code_edit = register("code_edit")
    relay = register("relay")
    client.force_login(owner)

    html = client.get("/").content.decode()

    edit_hint = "path=&lt;The file to write, inside the workspace.&gt; (required)\ntext=hello from zenweb"
    assert f'<option value="{code_edit.pk}" data-inputs="{edit_hint}">' in html
    assert f'<option value="{relay.pk}" data-inputs="subject=&lt;string&gt; (required)">' in html
    # No workflow is chosen when the page opens (runs/static/js/live.js fills the hint in on a choice).
    assert 'placeholder="choose a workflow to see its inputs"' in html


def test_it_answers_head_on_its_pages(client, owner):
    client.force_login(owner)

    for path in ("/", "/catalog/", "/claims/"):
        head = client.head(path)
        assert (head.status_code, head.content) == (200, b""), path
    assert client.post("/catalog/").status_code == 405
