"""Nobody approves their own request unless the operator allows it for a
single-person install (ZENWEB_ALLOW_SELF_APPROVAL), and the queue says so."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.actions.approvals import ApprovalError, do_decide
from runs.models import Approval, Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_an_approver_approving_their_own_run_by_default(celery_worker, client, approver, second_approver):
    run = do_create_run(register("approvals/wipe"), {}, user=approver)
    approval = run.approvals.get()
    client.force_login(approver)

    html = client.get("/approvals/").content.decode()
    refused = client.post(
        f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "mine, trust me"}, follow=True
    )

    assert "your own request: another approver must approve it" in html
    assert 'value="approve"' not in html and 'value="reject"' not in html  # no buttons on their own request
    assert "Self-approval is on" not in html
    assert "nobody approves their own request: another approver must decide" in refused.content.decode()
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    do_decide(approval.pk, second_approver, "approve", "checked")
    assert wait_for_run(run).status == Run.Status.COMPLETED


def test_it_lets_the_starter_reject_their_own_request(celery_worker, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=approver)

    do_decide(run.approvals.get().pk, approver, "reject", "changed my mind")

    assert run.approvals.get().status == Approval.Status.REJECTED


def test_it_allows_self_approval_when_the_operator_turns_it_on_and_shows_it(celery_worker, client, settings, approver):
    settings.ZENWEB_ALLOW_SELF_APPROVAL = True
    run = do_create_run(register("approvals/wipe"), {}, user=approver)
    approval = run.approvals.get()
    client.force_login(approver)

    html = client.get("/approvals/").content.decode()
    client.post(f"/approvals/{approval.pk}/decide/", {"decision": "approve", "reason": "I am the only one here"})

    assert "Self-approval is on (ZENWEB_ALLOW_SELF_APPROVAL)" in html
    assert "your own request" not in html and 'value="approve"' in html
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert wait_for_run(run).status == Run.Status.COMPLETED


def test_it_keeps_the_two_person_rule_even_with_self_approval_on(celery_worker, settings, approver):
    settings.ZENWEB_ALLOW_SELF_APPROVAL = True
    run = do_create_run(register("approvals/wipe_two"), {}, user=approver)

    with pytest.raises(ApprovalError, match="with the two-person rule nobody approves their own request"):
        do_decide(run.approvals.get().pk, approver, "approve", "mine")
