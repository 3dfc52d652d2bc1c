"""The command box, the approvals queue, claims and workflow registration
as people use them in the browser (HTTP level)."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.models import Approval, Claim, Command, Run, Workflow
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_answers_the_command_box_with_the_run_it_started(celery_worker, client, owner):
    register("research")
    client.force_login(owner)

    response = client.post("/commands/", {"command": "Run research workflow for laptops under $1000", "mode": "chat"})

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    wait_for_run(run)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Coordinator result" in html and "status-success" in html
    assert 'href="https://shop.example.net/p/aster-swift-14-16-512"' in html
    assert "shop-aster-swift-14" in html


def test_it_shows_a_commands_result_as_running_until_its_run_ends(client, owner):
    register("research")  # no worker: the run stays pending
    client.force_login(owner)

    client.post("/commands/", {"command": "Run research workflow for laptops under $1000", "mode": "chat"})

    command = Command.objects.get()
    for html in (
        client.get(f"/runs/{command.run_id}/").content.decode(),
        client.get(f"/commands/{command.pk}/").content.decode(),
    ):
        assert 'class="status status-running"' in html
        assert "status-success" not in html
    # The result as JSON, not as Python's repr of it.
    assert "&quot;_type&quot;: &quot;COORDINATOR_RESULT&quot;" in html and "None" not in html


def test_a_commands_page_asks_again_while_running_and_stops_once_final(
    client, owner, django_capture_on_commit_callbacks
):
    register("research")
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=False):  # no worker: the run stays pending
        client.post("/commands/", {"command": "Run research workflow for laptops under $1000", "mode": "chat"})
    command = Command.objects.get()
    live = f"/commands/{command.pk}/live/"

    page = client.get(f"/commands/{command.pk}/").content.decode()
    assert f'hx-get="{live}" hx-trigger="every 2s"' in page
    assert "Why this workflow: name given: the command names research" in page
    Run.objects.filter(pk=command.run_id).update(status=Run.Status.FAILED, error="the model endpoint is down")
    fragment = client.get(live).content.decode()

    assert 'id="command-live"' in fragment
    assert 'class="status status-error" id="command-status">error<' in fragment
    assert "the model endpoint is down" in fragment
    assert "hx-trigger" not in fragment


def test_it_shows_why_a_command_started_nothing(celery_worker, client, owner):
    register("research")
    register("code_edit")
    client.force_login(owner)

    response = client.post("/commands/", {"command": "Run code_edit for path=a.txt", "mode": "chat"}, follow=True)

    html = response.content.decode()
    assert "code_edit workflow requires code mode - currently in chat mode" in html
    assert "### Executor Iteration 1" in html
    assert not Run.objects.exists()


def test_it_keeps_other_peoples_commands_private(celery_worker, client, owner, teammate):
    register("research")
    client.force_login(owner)
    client.post("/commands/", {"command": "Get the thing", "mode": "chat"})
    command = Command.objects.get()

    client.force_login(teammate)
    assert client.get(f"/commands/{command.pk}/").status_code == 404


def test_it_shows_the_approvals_queue_only_to_approvers(celery_worker, client, owner, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)

    client.force_login(owner)
    refused = client.get("/approvals/")
    assert refused.status_code == 403
    html = refused.content.decode()
    assert "You cannot do this: the approvals queue needs the approve permission." in html
    assert '<a href="/">Back to the runs</a>' in html and "<nav>" in html
    assert (
        client.post(f"/approvals/{run.approvals.get().pk}/decide/", {"decision": "approve", "reason": "x"}).status_code
        == 403
    )
    client.force_login(approver)
    html = client.get("/approvals/").content.decode()
    assert f"run workflow wipe v{run.workflow.version}" in html
    assert 'name="reason" required' in html


def test_it_approves_from_the_queue_with_a_reason(celery_worker, client, owner, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()
    client.force_login(approver)

    refused = client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": ""}, follow=True)
    assert "a reason is required" in refused.content.decode()
    client.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "fine", "arguments_hash": approval.arguments_hash},
    )

    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert wait_for_run(run).status == Run.Status.COMPLETED


def test_it_links_only_http_sources_and_marks_expired_claims(celery_worker, client, owner):
    from datetime import timedelta

    from django.utils import timezone

    run = wait_for_run(do_create_run(register("commands/sourceless"), {}, user=owner))
    Claim.objects.create(
        run=run,
        claim="<b>bold</b> claim",
        confidence=0.5,
        url="javascript:alert(1)",
        source_ref="x",
        expires_at=timezone.now() - timedelta(days=1),
        ttl="1d",
    )
    client.force_login(owner)

    html = client.get("/claims/").content.decode()

    assert 'href="javascript:alert(1)"' not in html
    assert "&lt;b&gt;bold&lt;/b&gt; claim" in html
    assert "expired" in html
    assert "no source link" in html


def test_it_lists_every_problem_of_a_workflow_pasted_for_registration(client, staff):
    client.force_login(staff)

    html = client.post(
        "/catalog/register/",
        {"yaml": "name: Bad Name\nagents: {a: {description: a agent}}\nsteps:\n  - {id: s, agent: nobody}\n"},
    ).content.decode()

    assert "line 1" in html and "line 4" in html
    assert "nobody" in html
    assert not Workflow.objects.exists()


def test_it_registers_a_pasted_workflow_as_a_new_version(client, staff):
    client.force_login(staff)
    text = "name: pasted\nagents: {a: {description: a agent}}\nsteps:\n  - {id: s, agent: a}\n"

    client.post("/catalog/register/", {"yaml": text})
    client.post("/catalog/register/", {"yaml": text + "description: changed\n"})

    assert list(Workflow.objects.filter(name="pasted").values_list("version", flat=True).order_by("version")) == [1, 2]


def test_it_refuses_the_register_page_to_someone_not_staff_with_a_page_that_says_so(client, owner):
    client.force_login(owner)

    text = "name: pasted\nagents: {a: {description: a agent}}\nsteps:\n  - {id: s, agent: a}\n"
    page = client.get("/catalog/register/")
    posted = client.post("/catalog/register/", {"yaml": text})

    assert (page.status_code, posted.status_code) == (403, 403)
    html = page.content.decode()
    assert "<title>Not allowed · zenweb</title>" in html
    assert "You cannot do this: registering workflows is for staff." in html
    assert '<a href="/">Back to the runs</a>' in html
    assert 'name="yaml"' not in html
    assert not Workflow.objects.exists()


@pytest.mark.parametrize(
    ("pasted", "said"),
    [
        (" \n\t\n", "yaml: empty; paste a workflow&#x27;s YAML"),
        ("#" * 200_001, "yaml: 200,001 characters; paste a workflow of at most 200,000"),
    ],
)
def test_it_says_why_it_refuses_a_paste_that_is_no_workflow(client, staff, pasted, said):
    client.force_login(staff)

    page = client.post("/catalog/register/", {"yaml": pasted}, follow=True).content.decode()

    assert said in page
    assert not Workflow.objects.exists()
