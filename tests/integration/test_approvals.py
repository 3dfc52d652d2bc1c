"""Approvals: destructive workflows and gated tool calls wait for a person
with the approve permission, who decides with a reason on exact arguments."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.db import transaction

from runs.actions import do_create_run
from runs.actions.approvals import ApprovalError, do_decide, do_execute_approved_call, do_lapse_expired
from runs.models import Approval, Run, Step, ToolCall
from tests.conftest import assert_gapless, event_types, register, wait_for, wait_for_run
from tests.integration.api_client import api

pytestmark = pytest.mark.django_db(transaction=True)


def start(name: str, user=None) -> Run:
    return do_create_run(register(f"approvals/{name}"), {}, user=user)


def test_it_holds_a_destructive_workflow_until_approved(celery_worker, owner):
    run = start("wipe", owner)

    time.sleep(0.3)
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert not run.steps.exists()
    approval = run.approvals.get()
    assert (approval.kind, approval.status, approval.requested_by) == ("workflow", "pending", owner)
    assert approval.what == f"run workflow wipe v{run.workflow.version}"
    assert approval.why == "wipe is marked destructive"
    assert list(run.events.values_list("type", flat=True)) == ["approval_requested"]


@pytest.mark.sandbox
def test_it_runs_approved_work_once_with_the_decision_recorded(celery_worker, owner, approver):
    run = start("wipe", owner)
    approval = run.approvals.get()

    do_decide(approval.pk, approver, "approve", "scratch space only")
    with pytest.raises(ApprovalError, match=f"approval {approval.pk} is already approved"):
        do_decide(approval.pk, approver, "approve", "again")

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    [decision] = approval.decisions.all()
    assert (decision.user, decision.reason, decision.arguments_hash) == (
        approver,
        "scratch space only",
        approval.arguments_hash,
    )
    # The approval let the destructive command through, exactly once.
    assert run.tool_calls.get(name="run_shell").ok
    log = settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "wipe.log"
    assert log.read_text() == "wiped\n"
    assert list(run.events.filter(type="workflow_start").values_list("seq", flat=True)).__len__() == 1
    assert_gapless(run)


def test_it_refuses_people_without_the_approve_permission(celery_worker, owner, teammate):
    run = start("wipe", owner)
    approval = run.approvals.get()

    with pytest.raises(ApprovalError, match="needs the approve permission"):
        do_decide(approval.pk, teammate, "approve", "looks fine")

    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert not approval.decisions.exists()


def test_it_requires_a_reason(celery_worker, owner, approver):
    run = start("wipe", owner)

    with pytest.raises(ApprovalError, match="a reason is required"):
        do_decide(run.approvals.get().pk, approver, "approve", "   ")


def test_it_ends_rejected_work_blocked_with_the_reason(celery_worker, owner, approver):
    run = start("wipe", owner)

    do_decide(run.approvals.get().pk, approver, "reject", "not on a Friday")

    run.refresh_from_db()
    assert run.status == Run.Status.BLOCKED
    assert run.error == "rejected by approver: not on a Friday"
    assert run.is_terminal
    end = run.events.get(type="workflow_end")
    assert end.data["status"] == "blocked"


def test_it_needs_two_different_people_under_the_two_person_rule(celery_worker, approver, second_approver):
    run = start("wipe_two", approver)
    approval = run.approvals.get()

    with pytest.raises(ApprovalError, match="nobody approves their own request"):
        do_decide(approval.pk, approver, "approve", "mine")
    do_decide(approval.pk, second_approver, "approve", "checked")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    with pytest.raises(ApprovalError, match="you already decided"):
        do_decide(approval.pk, second_approver, "approve", "checked twice")


def test_it_starts_after_the_second_approval(celery_worker, owner, approver, second_approver):
    run = start("wipe_two", owner)
    approval = run.approvals.get()

    do_decide(approval.pk, approver, "approve", "ok")
    do_decide(approval.pk, second_approver, "approve", "ok too")

    assert wait_for_run(run).status == Run.Status.COMPLETED


def test_it_lapses_a_request_nobody_decided_in_time(celery_worker, owner, approver):
    run = start("wipe_expiring", owner)
    approval = run.approvals.get()
    time.sleep(0.4)

    with pytest.raises(ApprovalError, match="already lapsed"):
        do_decide(approval.pk, approver, "approve", "too late")

    run.refresh_from_db()
    assert run.status == Run.Status.BLOCKED
    assert run.error.startswith("lapsed: no decision before")
    assert run.events.filter(type="approval_lapsed").count() == 1
    assert do_lapse_expired() == 0


def test_it_refuses_a_decision_on_arguments_that_changed(celery_worker, owner, approver):
    run = start("wipe", owner)

    with pytest.raises(ApprovalError, match="the arguments changed"):
        do_decide(run.approvals.get().pk, approver, "approve", "ok", seen_hash="0" * 64)


def gated_call(run: Run) -> ToolCall:
    return wait_for(lambda: ToolCall.objects.filter(run=run, name="run_shell", status="waiting").first())


def test_it_pauses_only_the_step_whose_tool_call_needs_approval(celery_worker, owner):
    run = start("gated", owner)

    call = gated_call(run)
    wait_for(lambda: Step.objects.filter(run=run, step_id="other", status="completed").exists())
    approval = Approval.objects.get(tool_call=call)
    assert approval.kind == "tool"
    assert approval.arguments == {"command": "echo built >> build.log && cat build.log", "timeout": 30}
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert run.steps.get(step_id="build").status == Step.Status.RUNNING
    log = settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "build.log"
    assert not log.exists()


@pytest.mark.sandbox
def test_it_runs_an_approved_tool_call_once_and_the_step_goes_on(celery_worker, owner, approver):
    run = start("gated", owner)
    call = gated_call(run)
    approval = Approval.objects.get(tool_call=call)

    do_decide(approval.pk, approver, "approve", "harmless")
    run = wait_for_run(run)
    do_execute_approved_call(approval.pk)  # a redelivered task

    call.refresh_from_db()
    assert (call.status, call.ok) == ("done", True)
    assert "built" in call.result
    assert (settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "build.log").read_text() == "built\n"
    assert run.steps.get(step_id="build").output == "built"
    assert run.status == Run.Status.COMPLETED


def test_it_does_not_run_an_approved_call_whose_step_ended_before_it_could(celery_worker, owner, approver):
    run = start("gated", owner)
    call = gated_call(run)

    with transaction.atomic():  # the step ends between the decision and its task
        do_decide(Approval.objects.get(tool_call=call).pk, approver, "approve", "harmless")
        Step.objects.filter(pk=call.step_id).update(status=Step.Status.CANCELLED)
    call = wait_for(lambda: ToolCall.objects.exclude(status__in=ToolCall.PENDING).filter(pk=call.pk).first())

    assert (call.status, call.ok) == (ToolCall.Status.BLOCKED, False)
    assert call.result.startswith("error: not run: step build ended cancelled before the approved call could run")
    assert not (settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "build.log").exists()


def test_it_tells_the_model_when_its_call_was_rejected(celery_worker, owner, approver):
    run = start("gated", owner)
    call = gated_call(run)

    do_decide(Approval.objects.get(tool_call=call).pk, approver, "reject", "no shell today")
    run = wait_for_run(run)

    call.refresh_from_db()
    assert (call.status, call.error_kind) == ("blocked", "domain_rejection")
    assert call.result.startswith("error: rejected by approver: no shell today")
    assert not (settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "build.log").exists()
    assert run.status == Run.Status.COMPLETED


def test_it_lets_an_approver_open_the_runs_that_ask_for_a_decision(client, owner, approver, teammate):
    asking = start("wipe", owner)
    other = do_create_run(register("relay"), {"subject": "tides"}, user=owner)

    client.force_login(approver)
    assert client.get(f"/runs/{asking.pk}/").status_code == 200
    assert client.get(f"/runs/{other.pk}/").status_code == 404  # nothing to decide there
    client.force_login(teammate)  # no approve permission
    assert client.get(f"/runs/{asking.pk}/").status_code == 404


def test_an_approver_may_decide_but_not_cancel_or_resume_someone_elses_run(client, owner, approver):
    asking = start("wipe", owner)
    client.force_login(approver)

    page = client.post(f"/runs/{asking.pk}/cancel/", follow=True).content.decode()
    assert "only the person who started run" in page and "or staff, may cancel it" in page
    resumed = client.post(f"/runs/{asking.pk}/resume/", follow=True).content.decode()
    assert "or staff, may resume it" in resumed
    refused = api(approver).post(f"/api/runs/{asking.pk}/cancel")
    assert refused.status_code == 403
    assert refused.json() == {"error": f"only the person who started run {asking.pk}, or staff, may cancel it"}
    asking.refresh_from_db()
    assert asking.status == Run.Status.AWAITING_APPROVAL

    client.force_login(owner)
    client.post(f"/runs/{asking.pk}/cancel/")
    asking.refresh_from_db()
    assert asking.status == Run.Status.CANCELLED


def test_it_lapses_the_approval_of_a_step_the_failure_policy_cancelled(celery_worker, owner, approver):
    run = do_create_run(register("approvals/gated_abort"), {}, user=owner)
    approval = wait_for(lambda: run.approvals.filter(status=Approval.Status.PENDING).first())

    run = wait_for_run(run)

    approval.refresh_from_db()
    assert run.steps.get(step_id="build").status == Step.Status.CANCELLED
    assert approval.status == Approval.Status.LAPSED
    assert approval.reason == "step build was cancelled: run aborted: breaker failed"
    with pytest.raises(ApprovalError, match="is already lapsed"):
        do_decide(approval.pk, approver, "approve", "too late")
    assert run.tool_calls.get(name="run_shell").status == ToolCall.Status.BLOCKED
    assert event_types(run, step_id="build")[-3:] == ["step_skipped", "approval_lapsed", "tool_result"]


# The cancel comes while build waits for the approval, or while its model is
# still answering the turn that will ask for it.
@pytest.mark.parametrize("name", ["gated_cancel", "gated_cancel_midturn"])
def test_it_lapses_the_approval_of_a_step_the_coordinator_cancelled(celery_worker, owner, name):
    run = do_create_run(register(f"approvals/{name}"), {}, user=owner)

    approval = wait_for(lambda: run.approvals.filter(status=Approval.Status.LAPSED).first())

    assert approval.reason == "step build was cancelled: stop, not today"
    assert run.steps.get(step_id="build").status == Step.Status.CANCELLED
    assert run.tool_calls.get(name="run_shell").status == ToolCall.Status.BLOCKED
    assert wait_for_run(run).status == Run.Status.PARTIAL
