"""Approvals over the JSON API: the queue kept to approvers, paged pending
and decided, and a decision that starts an awaiting run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runs.actions import do_create_run
from runs.models import Approval, Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db


def test_it_keeps_the_approvals_queue_to_approvers(owner, teammate, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()

    refused = api(teammate).get("/api/approvals")
    assert (refused.status_code, refused.json()) == (403, {"error": "the approvals queue needs the approve permission"})
    assert post(api(teammate), f"/api/approvals/{approval.pk}/decide", {}).status_code == 403

    [listed] = api(approver).get("/api/approvals").json()["approvals"]
    # Nothing hidden in it: what a person reads escaped is the same.
    assert listed.pop("hidden_characters") is False
    assert listed.pop("escaped") == {k: listed[k] for k in ("what", "why", "arguments", "actions")}
    assert listed | {"created": None} == {
        "id": approval.pk,
        "run": run.pk,
        "workflow": "wipe",
        "status": "pending",
        "kind": "workflow",
        "step_id": "",
        "what": f"run workflow wipe v{run.workflow.version}",
        "why": "wipe is marked destructive",
        "arguments": {},
        # The command its step will run, as it will run: only that runs on this approval.
        "actions": [
            {
                "agent": "janitor",
                "tool": "run_shell",
                "arguments": {
                    "command": "mkdir -p build && touch build/x && rm -rf build"
                    " && echo wiped >> wipe.log && cat wipe.log"
                },
                "looks_like": "recursive delete (rm -r)",
            }
        ],
        "arguments_hash": approval.arguments_hash,
        "requested_by": "owner",
        "created": None,
        "expires_at": None,
        "decided_at": None,
        "reason": "",
        "required_approvals": 1,
        "approvals": 0,
        "decisions": [],
    }
    assert api(approver).get("/api/approvals?status=approved").json() == {"approvals": [], "next": None}


def approvals_of(run, count: int, **fields) -> list[Approval]:
    """``count`` approvals on ``run``, in id order (their created times may tie)."""
    Approval.objects.bulk_create(
        Approval(run=run, kind="tool", what=f"call {n}", why="y", arguments_hash="0" * 64, **fields)
        for n in range(count)
    )
    return list(run.approvals.order_by("pk"))


def test_it_pages_through_more_pending_approvals_than_fit_on_a_page(owner, approver):
    run = Run.objects.create(workflow=register("approvals/wipe"), created_by=owner, status="running")
    approvals = approvals_of(run, 203)
    client = api(approver)

    first = client.get("/api/approvals?limit=200").json()
    second = client.get(first["next"]).json()

    assert [a["id"] for a in first["approvals"]] == [a.pk for a in approvals[:200]]
    assert first["next"] == f"http://testserver/api/approvals?limit=200&before={approvals[199].pk}"
    assert ([a["id"] for a in second["approvals"]], second["next"]) == ([a.pk for a in approvals[200:]], None)
    assert len(client.get("/api/approvals").json()["approvals"]) == 50
    # A decision between two pages moves nothing that is still pending.
    Approval.objects.filter(pk=approvals[1].pk).update(status="approved")
    page = client.get(f"/api/approvals?limit=2&before={approvals[1].pk}").json()
    assert [a["id"] for a in page["approvals"]] == [approvals[2].pk, approvals[3].pk]


def test_it_pages_decided_approvals_latest_decided_first(owner, approver):
    run = Run.objects.create(workflow=register("approvals/wipe"), created_by=owner, status="completed")
    a, b, c = approvals_of(run, 3, status="lapsed", decided_at=datetime(2025, 3, 1, tzinfo=UTC))
    d = approvals_of(run, 1, status="lapsed", decided_at=datetime(2025, 3, 2, tzinfo=UTC))[-1]
    never = approvals_of(run, 1, status="lapsed")[-1]
    client = api(approver)

    ids, url = [], "/api/approvals?status=lapsed&limit=2"
    while url:
        body = client.get(url).json()
        ids.append([approval["id"] for approval in body["approvals"]])
        url = body["next"]

    assert ids == [[d.pk, c.pk], [b.pk, a.pk], [never.pk]]
    unknown = client.get("/api/approvals?before=999999")
    assert (unknown.status_code, unknown.json()["problems"]) == (
        400,
        [{"field": "before", "message": "no approval 999999"}],
    )


@pytest.mark.django_db(transaction=True)
def test_it_starts_an_awaiting_run_when_approved_and_refuses_a_second_decision(celery_worker, owner, approver):
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()
    client = api(approver)
    url = f"/api/approvals/{approval.pk}/decide"

    assert post(client, url, {"decision": "approve", "reason": "  "}).json()["problems"][0]["field"] == "reason"
    empty_hash = post(client, url, {"decision": "approve", "reason": "ok", "arguments_hash": ""})
    assert empty_hash.status_code == 400
    assert [p["field"] for p in empty_hash.json()["problems"]] == ["arguments_hash"]
    stale = post(client, url, {"decision": "approve", "reason": "ok", "arguments_hash": "0" * 64})
    assert (stale.status_code, stale.json()["error"]) == (
        409,
        "the arguments changed since you looked at them: review them again",
    )

    response = post(
        client, url, {"decision": "approve", "reason": "scratch space only", "arguments_hash": approval.arguments_hash}
    )
    again = post(client, url, {"decision": "approve", "reason": "again"})

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["approvals"]) == ("approved", 1)
    assert [(d["user"], d["decision"], d["reason"]) for d in body["decisions"]] == [
        ("approver", "approve", "scratch space only")
    ]
    assert (again.status_code, again.json()) == (409, {"error": f"approval {approval.pk} is already approved"})
    assert post(client, "/api/approvals/999999/decide", {"decision": "reject", "reason": "x"}).status_code == 404
    assert wait_for_run(run).status == Run.Status.COMPLETED
