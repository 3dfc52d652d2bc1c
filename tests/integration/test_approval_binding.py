"""An approval binds what runs (issue 25), written as the attacks: a
destructive workflow called as a tool, and a delete relayed through the
coordinator after the run was approved for something else."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from runs.actions import do_create_run
from runs.actions.approvals import do_decide
from runs.models import Approval, Run, ToolCall
from tests.conftest import register, wait_for, wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]


def workspace(run_id) -> object:
    return settings.ZENWEB_WORKSPACES / f"run-{run_id}"


def test_it_holds_a_destructive_workflow_called_as_a_tool_for_its_own_approval(celery_worker, owner, approver):
    register("approvals/wipe_tool")
    parent = do_create_run(register("approvals/calls_wipe"), {}, user=owner)

    child = wait_for(lambda: Run.objects.filter(parent_tool_call__run=parent).first())
    approval = wait_for(lambda: child.approvals.first())
    child.refresh_from_db()
    assert child.status == Run.Status.AWAITING_APPROVAL
    assert (approval.kind, approval.status, approval.requested_by) == ("workflow", "pending", owner)
    assert approval.actions == [
        {
            "agent": "janitor",
            "tool": "run_shell",
            "arguments": {"command": "echo wiped >> wipe.log && rm -rf build"},
            "looks_like": "recursive delete (rm -r)",
        }
    ]
    assert not child.steps.exists()
    assert not (workspace(child.pk) / "wipe.log").exists()
    parent.refresh_from_db()
    assert parent.status == Run.Status.RUNNING

    do_decide(approval.pk, approver, "approve", "build output only")

    parent = wait_for_run(parent)
    child.refresh_from_db()
    assert (child.status, parent.status) == (Run.Status.COMPLETED, Run.Status.COMPLETED)
    assert (workspace(child.pk) / "wipe.log").read_text() == "wiped\n"


def test_it_tells_the_caller_when_the_called_destructive_workflow_is_rejected(celery_worker, owner, approver):
    register("approvals/wipe_tool")
    parent = do_create_run(register("approvals/calls_wipe"), {}, user=owner)
    child = wait_for(lambda: Run.objects.filter(parent_tool_call__run=parent).first())

    do_decide(wait_for(lambda: child.approvals.first()).pk, approver, "reject", "not today")

    parent = wait_for_run(parent)
    child.refresh_from_db()
    assert child.status == Run.Status.BLOCKED
    assert not (workspace(child.pk) / "wipe.log").exists()
    call = parent.tool_calls.get(name="wipe_tool")
    assert (call.status, call.ok) == ("failed", False)
    assert "ended blocked: rejected by approver: not today" in call.result


def test_it_holds_a_relayed_delete_for_its_own_approval(celery_worker, owner, approver):
    victim = settings.ZENWEB_WORKSPACES / "run-999999"
    victim.mkdir(parents=True)
    (victim / "report.txt").write_text("another run's work")
    run = do_create_run(register("approvals/janitor_relay"), {"target": "build"}, user=owner)
    approval = run.approvals.get()
    # What the approver is shown is the command that will run, target filled in.
    assert approval.actions == [
        {
            "agent": "janitor",
            "tool": "run_shell",
            "arguments": {"command": "mkdir -p -- build && rm -rf -- build && echo deleted build"},
            "looks_like": "recursive delete (rm -r)",
        },
        {
            "agent": "janitor",
            "tool": "run_shell",
            "arguments": {"command": "bash -c $inbox"},
            "at_run_time": ["inbox"],
        },
    ]

    requested = run.events.get(type="approval_requested")
    assert requested.data["actions"] == approval.actions

    do_decide(approval.pk, approver, "approve", "target build only")

    relayed = wait_for(lambda: run.approvals.filter(kind=Approval.Kind.TOOL).first())
    assert relayed.status == Approval.Status.PENDING
    assert relayed.arguments == {"command": "bash -c 'rm -rf ../run-999999'", "timeout": 30}
    assert "was not shown when the run was approved" in relayed.why
    assert "looks like recursive delete" in relayed.why
    shown = wait_for(lambda: run.tool_calls.filter(name="run_shell", status=ToolCall.Status.DONE).first())
    assert "deleted build" in shown.result
    assert (victim / "report.txt").read_text() == "another run's work"

    do_decide(relayed.pk, approver, "reject", "that is another run's workspace")

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert (victim / "report.txt").read_text() == "another run's work"
    blocked = run.tool_calls.get(approval=relayed)
    assert (blocked.status, blocked.ok) == ("blocked", False)


def test_the_approvals_page_shows_the_commands_an_approval_covers(owner, approver, client):
    run = do_create_run(register("cleanup_workspace"), {"target": "out/$(id)"}, user=owner)
    client.force_login(approver)

    html = client.get("/approvals/").content.decode()

    article = html[html.index(f'id="approval-{run.approvals.get().pk}"') :]
    assert "What its steps will run" in article
    # The target as it will run: one quoted word (escaped for HTML here; each
    # word in a span that keeps it on one line).
    words = re.sub(r'<span class="tok">([^<]*)</span>', r"\1", article)
    assert "mkdir -p -- &#x27;out/$(id)&#x27; &amp;&amp; touch -- &#x27;out/$(id)&#x27;/old.o" in words
    assert "any other command, file change or MCP call in the run asks for its own" in article
    assert "looks like recursive delete (rm -r) (a hint, not a check)" in article


def test_an_approval_says_which_calls_a_model_will_compose(owner):
    run = do_create_run(register("approvals/model_janitor"), {}, user=owner)

    # None of these is approved by the workflow's approval: each call asks again.
    assert run.approvals.get().actions == [
        {"agent": "janitor", "tool": "run_shell", "arguments": {}, "at_run_time": ["model"]},
        {"agent": "janitor", "tool": "write_file", "arguments": {}, "at_run_time": ["model"]},
    ]


def test_a_called_destructive_workflow_waiting_for_approval_ends_with_its_caller(celery_worker, owner):
    from runs.actions import do_cancel_run

    register("approvals/wipe_tool")
    parent = do_create_run(register("approvals/calls_wipe"), {}, user=owner)
    child = wait_for(lambda: Run.objects.filter(parent_tool_call__run=parent).first())
    approval = wait_for(lambda: child.approvals.first())

    do_cancel_run(parent.pk, "changed my mind")

    child = wait_for_run(child)
    approval.refresh_from_db()
    assert child.status == Run.Status.CANCELLED
    # Nobody can approve it any more: nothing of it runs later.
    assert approval.status == Approval.Status.LAPSED
    assert not (workspace(child.pk) / "wipe.log").exists()
