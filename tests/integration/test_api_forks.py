"""Forking a run over the JSON API (issue #52): POST /api/runs/{id}/fork."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.models import Approval, Run, Step
from tests.conftest import register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_owner_forks_a_finished_run_at_a_step_with_new_instructions(celery_worker, owner):
    parent = wait_for_run(do_create_run(register("forks/chain"), {}, user=owner))
    client = api(owner)

    response = post(client, f"/api/runs/{parent.pk}/fork", {"step": "draft", "instructions": "Draft a haiku."})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["forked_from"], body["fork_step"], body["created_by"]) == (parent.pk, "draft", "owner")
    assert response["Location"] == body["url"]
    fork = wait_for_run(Run.objects.get(pk=body["id"]))
    detail = client.get(f"/api/runs/{fork.pk}").json()
    steps = {step["step_id"]: step for step in detail["steps"]}
    assert (steps["gather"]["reused"], steps["gather"]["output"]) == (True, "gathered")
    assert (steps["draft"]["reused"], steps["draft"]["output"]) == (False, "writer finished: Draft a haiku.")
    assert steps["gather"]["prompt_tokens"] == 0
    assert "step_reused" in {event["type"] for event in detail["events"]}


def test_it_refuses_a_fork_the_caller_may_not_make_or_that_cannot_be(owner, teammate):
    parent = do_create_run(register("forks/chain"), {}, user=owner)  # pending: no worker here
    Step.objects.create(run=parent, step_id="draft", agent="writer", position=2)
    client = api(owner)

    running = post(client, f"/api/runs/{parent.pk}/fork", {"step": "draft"})
    assert (running.status_code, running.json()["error"]) == (
        409,
        f"run {parent.pk} is pending: only a run that has ended can be forked",
    )
    Run.objects.filter(pk=parent.pk).update(status=Run.Status.COMPLETED)
    unknown = post(client, f"/api/runs/{parent.pk}/fork", {"step": "review"})
    assert unknown.status_code == 400
    assert unknown.json()["error"] == f"run {parent.pk} has no step 'review' to fork at (its steps: draft)"
    misspelt = post(client, f"/api/runs/{parent.pk}/fork", {"step": "draft", "instruction": "x"})
    assert misspelt.status_code == 400
    stranger = post(api(teammate), f"/api/runs/{parent.pk}/fork", {"step": "draft"})
    assert (stranger.status_code, stranger.json()["error"]) == (404, f"run {parent.pk} not found")
    assert not Run.objects.filter(forked_from=parent).exists()


def test_a_fork_of_a_destructive_workflow_waits_for_approval_again(owner):
    parent = do_create_run(register("approvals/wipe"), {}, user=owner)
    Run.objects.filter(pk=parent.pk).update(status=Run.Status.COMPLETED)
    Step.objects.create(run=parent, step_id="janitor", agent="janitor", position=1, status=Step.Status.COMPLETED)

    response = post(api(owner), f"/api/runs/{parent.pk}/fork", {"step": "janitor"})

    assert response.status_code == 201, response.content
    fork = Run.objects.get(pk=response.json()["id"])
    assert fork.status == Run.Status.AWAITING_APPROVAL
    assert Approval.objects.filter(run=fork, status=Approval.Status.PENDING).count() == 1


def test_a_run_of_a_retired_version_cannot_be_forked(owner):
    parent = do_create_run(register("forks/chain"), {}, user=owner)
    Run.objects.filter(pk=parent.pk).update(status=Run.Status.COMPLETED)
    Step.objects.create(run=parent, step_id="draft", agent="writer", position=2, status=Step.Status.COMPLETED)
    parent.workflow.offer = parent.workflow.Offer.RETIRED
    parent.workflow.save(update_fields=["offer"])

    response = post(api(owner), f"/api/runs/{parent.pk}/fork", {"step": "draft"})

    assert response.status_code == 403
    assert "is retired and cannot be started" in response.json()["error"]
    assert not Run.objects.filter(forked_from=parent).exists()
