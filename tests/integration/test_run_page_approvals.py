"""A run page's approvals card: what waits, with Approve and Reject only for
someone the approval rules let decide, the decision taken in place, and an
audit block after it (HTTP level; the browser test drives it live)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from runs.actions import do_create_run
from runs.models import Approval, Run
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HTTP_HX_REQUEST": "true"}


def waiting(name: str, user) -> Run:
    return do_create_run(register(f"approvals/{name}"), {}, user=user)


def card(client, run: Run) -> str:
    response = client.get(f"/runs/{run.pk}/approvals/")
    assert response.status_code == 200
    return response.content.decode()


def test_an_approver_sees_what_waits_and_may_decide_it_on_the_run_page(celery_worker, client, owner, approver):
    run = waiting("wipe", owner)
    approval = run.approvals.get()
    client.force_login(approver)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert f'id="run-approval-{approval.pk}"' in html
    assert "asked by <strong>owner</strong>" in html
    # The command as it will run, each word whole.
    assert '<span class="tok">rm</span> <span class="tok">-rf</span> <span class="tok">build</span>' in html
    assert 'name="decision" value="approve"' in html and 'name="decision" value="reject"' in html
    assert f'action="/runs/{run.pk}/approvals/{approval.pk}/decide/"' in html


def test_the_requester_sees_no_approve_or_reject_on_their_own_request(celery_worker, client, owner, approver):
    # Even someone who may decide others' approvals does not decide their own.
    run = waiting("wipe", approver)
    client.force_login(approver)

    html = card(client, run)

    assert "Your own request: another approver must decide it." in html
    assert 'value="approve"' not in html and 'value="reject"' not in html


def test_someone_without_the_permission_sees_what_waits_and_no_buttons(celery_worker, client, owner, staff):
    run = waiting("wipe", owner)
    client.force_login(staff)  # staff see every run; deciding needs the permission

    html = card(client, run)

    assert "Waiting for approval: run workflow wipe" in html
    assert "Waiting for someone allowed to approve it." in html
    assert 'value="approve"' not in html


def test_a_decision_in_place_shows_who_decided_when_and_why_in_place_of_the_buttons(
    celery_worker, client, owner, approver, second_approver
):
    run = waiting("wipe_two", owner)  # two approvers needed
    approval = run.approvals.get()
    client.force_login(approver)
    url = f"/runs/{run.pk}/approvals/{approval.pk}/decide/"
    sent = {"decision": "approve", "reason": "looks <b>fine</b>", "arguments_hash": approval.arguments_hash}

    first = client.post(url, sent, **HTMX).content.decode()

    # Still pending: the first approver is told, and has no buttons left.
    assert "you already decided on this approval." in first
    assert 'value="approve"' not in first and "1 of 2 decisions: approver approved" in first
    client.force_login(second_approver)
    second = client.post(url, sent | {"reason": "ok too"}, **HTMX).content.decode()

    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert 'value="approve"' not in second
    assert 'data-status="approved"' in second
    assert "approver approved</dt>" in second and "approver2 approved</dt>" in second
    assert "“looks &lt;b&gt;fine&lt;/b&gt;”" in second and "“ok too”" in second


def test_a_refused_decision_says_why_in_the_card(celery_worker, client, owner, approver):
    run = waiting("wipe", owner)
    approval = run.approvals.get()
    client.force_login(approver)

    html = client.post(
        f"/runs/{run.pk}/approvals/{approval.pk}/decide/",
        {"decision": "approve", "reason": "ok", "arguments_hash": "0" * 64},
        **HTMX,
    ).content.decode()

    assert "the arguments changed since you looked at them: review them again" in html
    assert Approval.objects.get().status == Approval.Status.PENDING


def test_an_approval_of_another_run_is_not_decided_through_this_one(celery_worker, client, owner, approver):
    run = waiting("wipe", owner)
    other = waiting("wipe", owner)
    client.force_login(approver)

    response = client.post(
        f"/runs/{run.pk}/approvals/{other.approvals.get().pk}/decide/", {"decision": "approve", "reason": "ok"}
    )

    assert response.status_code == 302
    assert other.approvals.get().status == Approval.Status.PENDING


def test_the_approvals_card_needs_sight_of_the_run(celery_worker, client, owner, teammate):
    run = waiting("wipe", owner)
    client.force_login(teammate)

    assert client.get(f"/runs/{run.pk}/approvals/").status_code == 404
    teammate.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    assert client.get(f"/runs/{run.pk}/approvals/").status_code == 200


def test_the_requester_may_decide_where_the_operator_allows_self_approval(celery_worker, client, approver, settings):
    settings.ZENWEB_ALLOW_SELF_APPROVAL = True
    run = waiting("wipe", approver)
    client.force_login(approver)

    html = card(client, run)

    assert 'value="approve"' in html and "Your own request" not in html
    # Never under the two-person rule.
    assert 'value="approve"' not in card(client, waiting("wipe_two", approver))


def test_the_queue_offers_no_second_decision_under_the_two_person_rule(celery_worker, client, owner, approver):
    run = waiting("wipe_two", owner)
    client.force_login(approver)
    client.post(
        f"/approvals/{run.approvals.get().pk}/decide/",
        {"decision": "approve", "reason": "one of two", "arguments_hash": run.approvals.get().arguments_hash},
    )

    html = client.get("/approvals/").content.decode()

    assert "You already decided on this approval." in html
    assert 'value="approve"' not in html
