"""Runs over the JSON API: the list each user may see, events after a seq, a
finished run with its steps, and cancelling."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run, do_start_run
from runs.models import Event, Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import api

pytestmark = pytest.mark.django_db


def test_it_lists_only_the_users_runs_and_staff_sees_all(owner, teammate, staff):
    relay = register("relay")
    mine = [Run.objects.create(workflow=relay, inputs={"subject": str(n)}, created_by=owner) for n in range(3)]
    theirs = Run.objects.create(workflow=relay, inputs={"subject": "x"}, created_by=teammate, status="completed")
    client = api(owner)

    first = client.get("/api/runs?limit=2").json()
    assert [r["id"] for r in first["runs"]] == [mine[2].pk, mine[1].pk]
    assert first["runs"][0] | {"created": None} == {
        "id": mine[2].pk,
        "url": f"http://testserver/runs/{mine[2].pk}/",
        "workflow": "relay",
        "version": 1,
        "status": "pending",
        "mode": "chat",
        "created_by": "owner",
        "created": None,
        "started": None,
        "finished": None,
        "error": "",
        "result": "",
        "stuck": "",
        "forked_from": None,
        "fork_step": "",
    }
    assert first["next"] == f"http://testserver/api/runs?limit=2&before={mine[1].pk}"
    second = client.get(first["next"]).json()
    assert ([r["id"] for r in second["runs"]], second["next"]) == ([mine[0].pk], None)

    everyone = api(staff).get("/api/runs").json()["runs"]
    assert [r["id"] for r in everyone] == [theirs.pk, *[r.pk for r in reversed(mine)]]
    assert [r["id"] for r in api(staff).get("/api/runs?status=completed&workflow=relay").json()["runs"]] == [theirs.pk]
    assert api(staff).get("/api/runs?workflow=echo").json()["runs"] == []

    too_many = client.get("/api/runs?limit=500")
    assert too_many.status_code == 400
    assert too_many.json()["problems"] == [{"field": "limit", "message": "Input should be less than or equal to 200"}]


def test_it_returns_exactly_the_events_after_a_seq(owner, teammate):
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=owner)
    Event.objects.bulk_create(Event(run=run, seq=n, type=f"type{n}") for n in range(1, 8))
    client = api(owner)

    body = client.get(f"/api/runs/{run.pk}?after=4").json()

    assert [(e["seq"], e["type"]) for e in body["events"]] == [(5, "type5"), (6, "type6"), (7, "type7")]
    assert (body["next_after"], body["more"]) == (7, False)
    caught_up = client.get(f"/api/runs/{run.pk}?after=7").json()
    assert (caught_up["events"], caught_up["next_after"]) == ([], 7)
    assert client.get(f"/api/runs/{run.pk}?after=-1").json()["problems"][0]["field"] == "after"
    assert api(teammate).get(f"/api/runs/{run.pk}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_it_shows_a_finished_run_with_its_steps_and_result(celery_worker, owner):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tides"}, user=owner))

    body = api(owner).get(f"/api/runs/{run.pk}").json()

    assert (body["status"], body["inputs"], body["approvals"], body["claims"]) == (
        "completed",
        {"subject": "tides"},
        [],
        [],
    )
    steps = {step["step_id"]: step for step in body["steps"]}
    assert set(steps) == {"coordinator", "first", "second"}
    assert (steps["second"]["status"], steps["second"]["output"]) == ("completed", "second done with tides")
    assert [e["seq"] for e in body["events"]] == list(range(1, run.last_event_seq + 1))
    assert body["events"][0]["type"] == "workflow_start"
    assert body["coordinator_result"]["result"]["summary"] == run.result


def test_it_cancels_a_run_for_a_token_holder(django_capture_on_commit_callbacks, owner, teammate):
    with django_capture_on_commit_callbacks(execute=False):
        run = do_create_run(register("relay"), {"subject": "x"}, user=owner)
    with django_capture_on_commit_callbacks(execute=False):
        do_start_run(run.pk)
    client = api(owner)

    assert api(teammate).post(f"/api/runs/{run.pk}/cancel").status_code == 404
    response = client.post(f"/api/runs/{run.pk}/cancel")
    again = client.post(f"/api/runs/{run.pk}/cancel")

    assert (response.status_code, response.json()) == (200, {"id": run.pk, "status": "cancelled", "cancelled": True})
    assert (again.status_code, again.json()["error"]) == (409, f"run {run.pk} already ended cancelled")
