"""Every stored event has the shape its type's model gives (STYLE rule 12),
and an exported run validates against the export's generated schema.

Each event is checked against its model when it is made (agents.events), so
every test that makes a run checks the shapes of the events it causes; these
runs read the events back after commit, as the pages and the API do."""

from __future__ import annotations

import jsonschema
import pytest
from django.urls import reverse
from django.utils import timezone

from agents.events import REGISTRY
from runs.actions import do_create_run, do_fail_resume
from runs.export import event_schema, export_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

# workflow -> (its inputs, the event types it is here for, workflows it calls)
CASES: dict[str, tuple[dict, set[str], list[str]]] = {
    "relay": (
        {"subject": "tides"},
        {"workflow_start", "step_start", "agent_turn", "tool_call", "message_sent", "agent_inbox_drain", "step_end"},
        [],
    ),
    "hub_and_spoke": (
        {},
        {"agent_wake", "agent_idle", "coordinator_inbox_message", "coordinator_message", "coordinator_narration"},
        [],
    ),
    "loop_review": ({}, {"loop_iteration", "loop_end", "coordinator_synthesis", "workflow_end"}, []),
    "containers_run/judge_yes": ({}, {"loop_judge", "loop_judged"}, []),
    "misaddressed": ({}, {"message_dropped"}, []),
    "broken_provider": ({}, {"error", "step_skipped"}, []),
    "research_brief": ({}, {"worker_spawned"}, []),
    "research": ({"query": "laptops under $1000"}, {"claim_recorded"}, []),
    "tools/parallel_calls": ({}, {"tool_started", "tool_result"}, []),
    "tools/delegating": (
        {},
        {"child_run_linked", "child_run_result"},
        ["tools/summarize_topic", "tools/failing_topic"],
    ),
    "extend/architect": ({}, {"workflow_created"}, []),
}


@pytest.mark.parametrize("name", CASES)
def test_every_event_of_a_run_fits_its_types_model(celery_worker, owner, name):
    inputs, shows, calls = CASES[name]
    for called in calls:
        register(called)

    run = wait_for_run(do_create_run(register(name), inputs, user=owner), timeout=60)

    events = list(run.events.order_by("seq"))
    assert shows <= {event.type for event in events}
    for event in events:
        REGISTRY[event.type].model_validate(event.data)
    schema = jsonschema.Draft202012Validator(event_schema())
    for row in export_run(run)["events"]:
        schema.validate(row)


def test_a_resume_that_failed_says_why_in_a_resume_failed_event(owner):
    # The one type no workflow here emits: a resume whose model call broke.
    run = Run.objects.create(workflow=register("relay"), created_by=owner, status="running", started=timezone.now())
    step = Step.objects.create(run=run, step_id="first", agent="sender", status="completed", resuming=True)

    do_fail_resume(step.pk, "the model is down")

    event = run.events.get(type="resume_failed")
    assert (event.step_id, event.data) == ("first", {"error": "the model is down"})
    REGISTRY["resume_failed"].model_validate(event.data)


def test_the_export_schema_is_served_next_to_the_export(client, owner):
    client.force_login(owner)

    response = client.get(reverse("runs:export-events-schema"))

    assert response.status_code == 200
    schema = response.json()
    assert set(schema["discriminator"]["mapping"]) == set(REGISTRY)
    assert len(schema["oneOf"]) == len(REGISTRY)


def test_an_exported_event_with_a_wrong_payload_does_not_validate():
    row = {"seq": 1, "type": "step_start", "step_id": "s1", "data": {"agent": 3}, "created": "2026-01-01T00:00:00"}

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(row, event_schema())
