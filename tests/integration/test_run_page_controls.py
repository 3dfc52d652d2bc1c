"""The run page's controls for who may use them: Cancel (asking first) and
Resume (saying what it does) for the run's starter and staff, not for an
approver looking at someone else's run; no approvals-queue link for someone
who would get a 403 there; a cancelled run reads as cancelled, not an error."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs import live
from runs.actions import do_cancel_run, do_create_run
from runs.models import Run, Step
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

CANCEL = 'action="/runs/{}/cancel/"'
RESUME = 'action="/runs/{}/resume/"'


def running(owner) -> Run:
    """A running run (no worker takes it up)."""
    workflow = register("relay")
    run = Run.objects.create(
        workflow=workflow, inputs={"subject": "tea"}, created_by=owner, status="running", started=timezone.now()
    )
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    return run


def page(client, user, run: Run) -> str:
    client.force_login(user)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_starter_and_staff_get_cancel_with_a_confirmation_and_a_resume_that_says_what_it_does(client, owner, staff):
    run = running(owner)

    for user in (owner, staff):
        html = page(client, user, run)
        assert CANCEL.format(run.pk) in html and RESUME.format(run.pk) in html
        assert f'hx-confirm="Cancel run #{run.pk}? Its unfinished steps stop at their next turn' in html
        assert ">Resume stuck work</button>" in html
        assert 'title="Queue again the work of a run that seems stuck' in html


def test_an_approver_sees_no_cancel_or_resume_on_someone_elses_run(celery_worker, client, owner, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)  # an approver may see it: it asks them

    html = page(client, approver, run)

    assert CANCEL.format(run.pk) not in html and RESUME.format(run.pk) not in html
    assert '<span id="run-cancel" hx-preserve></span>' in html  # its place, kept empty by live updates
    assert client.post(f"/runs/{run.pk}/cancel/").status_code == 302
    assert Run.objects.get(pk=run.pk).status == Run.Status.AWAITING_APPROVAL


def test_a_live_update_carries_no_control_for_anyone(client, owner):
    run = running(owner)
    do_cancel_run(run.pk, f"cancelled by {owner.username}")

    update, _ = live.render_update(run.pk, 0)

    assert "/cancel/" not in update and "/resume/" not in update


def test_someone_without_the_approve_permission_gets_no_link_to_the_approvals_queue(celery_worker, client, owner):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)  # waiting for an approval

    html = page(client, owner, run)

    assert 'href="/approvals/' not in html
    assert "Your own request: another approver must decide it." in html


def test_a_cancelled_run_reads_who_cancelled_it_and_not_an_error(client, owner):
    run = running(owner)
    do_cancel_run(run.pk, f"cancelled by {owner.username}")

    html = page(client, owner, run)

    assert "<strong>Cancelled</strong>: cancelled by owner</div>" in html
    assert "Error:" not in html and 'class="run-error"' not in html
    assert "status-error" not in html and '<span class="status status-cancelled">cancelled</span>' in html
