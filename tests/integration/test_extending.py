"""The coordinator extends the system (issue #49): in code mode it registers
a workflow, or proposes a tool that runs once on its example in the sandbox,
waits for an approver, and is then called, sandboxed, by a later run's
agent that lists it. In chat mode, or with a spec that cannot be right, the
model is told why and nothing is registered."""

from __future__ import annotations

import json

import jsonschema
import pytest
from django.test import Client
from django.urls import reverse

from agents.spec import WorkflowValidationError
from agents.tools import default_registry
from runs.actions import do_create_run
from runs.models import Approval, CreatedTool, Run, Workflow
from tests.conftest import assert_gapless, register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db(transaction=True)


def finished(name: str, user, mode: str | None = None) -> Run:
    run = wait_for_run(do_create_run(register(f"extend/{name}"), {}, user=user, mode=mode), timeout=60)
    assert run.status == Run.Status.COMPLETED, run.error
    return run


def published(tool: str) -> dict:
    """The result schema tool_schemas.json publishes for ``tool``."""
    return next(e for e in default_registry().catalog()["tools"] if e["id"].endswith(f".{tool}"))["result"]["schema"]


def results(run: Run, tool: str) -> list[tuple[bool, str]]:
    return [(call.ok, call.result) for call in run.tool_calls.filter(name=tool).order_by("pk")]


@pytest.mark.sandbox
def test_a_tool_created_in_code_mode_is_approved_then_called_sandboxed_by_a_later_run(
    celery_worker, client, owner, approver
):
    run = finished("toolsmith", owner)

    [(ok, text)] = results(run, "create_tool")
    assert ok, text
    jsonschema.validate(json.loads(text), published("create_tool"))
    proposed = json.loads(text)["result"]
    assert (proposed["name"], proposed["status"], proposed["example_exit_code"]) == (
        "city_greeting",
        "waiting_for_approval",
        0,
    )
    assert "hello, Paris" in proposed["example_output"]
    assert "first process: bwrap" in proposed["example_output"]
    tool = CreatedTool.objects.get(name="city_greeting")
    assert (tool.status, tool.run, tool.created_by) == ("pending", run, owner)
    # The run ended; the tool's approval did not lapse with it.
    approval = Approval.objects.get(pk=proposed["approval_id"])
    assert (approval.kind, approval.status, approval.requested_by) == ("new_tool", "pending", owner)
    assert run.events.filter(type="tool_created", data__approval_id=approval.pk).exists()
    # Not offered before a person approves it.
    with pytest.raises(WorkflowValidationError, match="unknown tool 'city_greeting'"):
        register("extend/greeter")

    client.force_login(approver)
    page = client.get(reverse("runs:approvals")).content.decode()
    assert "new tool city_greeting" in page
    assert "hello, Paris" in page  # the example's output
    assert "TOOL_INPUT" in page  # the spec: its command
    answer = client.post(
        reverse("runs:decide", args=[approval.pk]),
        {"decision": "approve", "reason": "reads its input only", "arguments_hash": approval.arguments_hash},
    )
    assert answer.status_code == 302

    tool.refresh_from_db()
    assert tool.status == "approved"
    assert run.events.filter(type="tool_registered", data__status="approved").exists()
    later = finished("greeter", owner)
    [(ok, text)] = results(later, "city_greeting")
    assert ok, text
    answer = json.loads(text)
    jsonschema.validate(answer, published("run_shell"))  # answered as run_shell answers
    assert answer["result"]["exit_code"] == 0
    # The input reached the command as data: the quote in it started no second command.
    assert answer["result"]["output"].startswith("hello, Oslo'; echo spliced; '\n")
    assert "first process: bwrap" in answer["result"]["output"]  # in the sandbox's own PID namespace
    catalog = client.get(reverse("runs:catalog")).content.decode()
    assert f'created by run <a href="/runs/{run.pk}/">#{run.pk}</a> (owner)' in catalog
    assert "zenweb.created.city_greeting" in catalog
    assert_gapless(run)
    assert_gapless(later)


@pytest.mark.sandbox
def test_a_tool_rejected_over_the_api_is_never_offered(celery_worker, owner, approver):
    run = finished("toolsmith", owner)
    client = api(approver)
    [listed] = client.get("/api/approvals?status=pending").json()["approvals"]
    assert (listed["kind"], listed["what"]) == ("new_tool", "new tool city_greeting")
    assert listed["arguments"]["spec"]["example_input"] == {"city": "Paris"}
    assert "hello, Paris" in listed["arguments"]["example_output"]

    answer = post(
        client,
        f"/api/approvals/{listed['id']}/decide",
        {"decision": "reject", "reason": "no new tools this week", "arguments_hash": listed["arguments_hash"]},
    )

    assert (answer.status_code, answer.json()["status"]) == (200, "rejected")

    assert CreatedTool.objects.get(name="city_greeting").status == "rejected"
    assert run.events.filter(type="tool_registered", data__status="rejected").exists()
    with pytest.raises(WorkflowValidationError, match="unknown tool 'city_greeting'"):
        register("extend/greeter")


def test_create_tool_is_refused_in_chat_mode(celery_worker, owner):
    run = finished("toolsmith_chat", owner)

    [(ok, text)] = results(run, "create_tool")
    assert not ok
    assert text.startswith(f"error: refused: create_tool works in code mode only, and run {run.pk} is in chat mode")
    assert not CreatedTool.objects.exists()
    assert not Approval.objects.exists()


@pytest.mark.sandbox
def test_create_tool_refuses_a_taken_name_a_bad_schema_and_a_failing_example(celery_worker, owner):
    run = finished("refused_tools", owner)

    taken, bad_schema, misfit, failing = results(run, "create_tool")
    assert not any(ok for ok, _ in (taken, bad_schema, misfit, failing))
    assert "refused: 'run_shell' is a tool agents already get by that name" in taken[1]
    assert "spec.input_schema: Value error, not a valid JSON schema: 'zero' is not of type 'number'" in bad_schema[1]
    assert "example_input does not fit input_schema at n: Field required" in misfit[1]
    assert "refused: the example of failing_example failed" in failing[1]
    assert "exit code: 3\nbroken" in failing[1]
    assert not CreatedTool.objects.exists()
    assert not run.events.filter(type="tool_created").exists()


def test_a_workflow_created_in_code_mode_is_offered_with_who_created_it(celery_worker, client, owner):
    run = finished("architect", owner)

    created, refused = results(run, "create_workflow")
    assert created[0], created[1]
    assert json.loads(created[1]) == {"result": {"name": "haiku_writer", "version": 1, "created": True}}
    jsonschema.validate(json.loads(created[1]), published("create_workflow"))
    assert not refused[0]
    assert "refused: the workflow is not valid" in refused[1]
    assert "unknown tool 'no_such_tool'" in refused[1]
    workflow = Workflow.objects.get(name="haiku_writer")
    assert (workflow.offer, workflow.created_by_run, workflow.created_by) == ("latest", run, owner)
    assert not Workflow.objects.filter(name="broken_writer").exists()
    assert run.events.get(type="workflow_created").data["workflow"] == "haiku_writer"
    # Offered like any catalog workflow: a run of it starts and completes.
    haiku = wait_for_run(do_create_run(workflow, {"topic": "rain"}, user=owner))
    assert (haiku.status, haiku.steps.get(step_id="write").output) == ("completed", "a haiku about rain")

    client.force_login(owner)
    page = client.get(reverse("runs:catalog")).content.decode()
    assert f'created by run <a href="/runs/{run.pk}/">#{run.pk}</a> (owner)' in page


def test_create_workflow_is_refused_in_chat_mode(celery_worker, owner):
    run = finished("architect_chat", owner)

    assert [ok for ok, _ in results(run, "create_workflow")] == [False, False]
    assert "create_workflow works in code mode only" in results(run, "create_workflow")[0][1]
    assert not Workflow.objects.filter(name="haiku_writer").exists()


def test_a_spec_holding_a_known_secret_is_refused(celery_worker, owner, settings):
    settings.ZENWEB_SECRET_VALUES = ["first process"]

    run = finished("toolsmith", owner)

    [(ok, text)] = results(run, "create_tool")
    assert not ok
    assert "refused: the spec holds a secret value of this server" in text
    assert not CreatedTool.objects.exists()


@pytest.mark.sandbox
def test_a_known_secret_in_the_examples_output_never_reaches_the_approver(celery_worker, owner, settings):
    settings.ZENWEB_SECRET_VALUES = ["hello, Paris"]

    run = finished("toolsmith", owner)

    approval = Approval.objects.get(run=run, kind="new_tool")
    tool = CreatedTool.objects.get(approval=approval)
    stored = json.dumps([approval.arguments, tool.spec, tool.example_output, results(run, "create_tool")])
    assert "hello, Paris" not in stored
    assert tool.example_output.startswith("exit code: 0\n[redacted]\n")


def test_a_workflow_may_not_offer_itself_under_a_created_tools_name(owner):
    CreatedTool.objects.create(name="summarize_topic", spec={}, example_exit_code=0, status="approved")

    with pytest.raises(WorkflowValidationError, match="'summarize_topic' is the name of a tool a coordinator created"):
        register("tools/summarize_topic")


def test_a_created_tool_whose_approval_was_purged_holds_no_name(owner):
    # Its run was purged (purge_runs), its approval with it: nobody can approve it any more.
    CreatedTool.objects.create(name="summarize_topic", spec={}, example_exit_code=0, status="pending")

    assert register("tools/summarize_topic").tool_name == "summarize_topic"


def test_create_workflow_lifts_no_approval_gate_a_person_set(celery_worker, owner):
    register("approvals/wipe")

    run = finished("ungate", owner)

    lifted, kept = results(run, "create_workflow")
    assert not lifted[0]
    assert "refused: wipe v2 would drop what v1 needs a person's approval for (destructive: true)" in lifted[1]
    assert kept[0], kept[1]
    assert json.loads(kept[1])["result"] == {"name": "wipe", "version": 2, "created": True}
    assert [(w.version, w.spec["destructive"]) for w in Workflow.objects.filter(name="wipe").order_by("version")] == [
        (1, True),
        (2, True),
    ]


def test_staff_withdraw_an_approved_tool_and_no_agent_gets_it_any_more(owner, django_user_model):
    spec = {
        "name": "city_greeting",
        "description": "Greets a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "command": 'jq -r .city <<<"$TOOL_INPUT"',
        "example_input": {"city": "Paris"},
    }
    tool = CreatedTool.objects.create(name="city_greeting", spec=spec, example_exit_code=0, status="approved")
    assert register("extend/greeter").name == "greeter"
    staff = Client()
    staff.force_login(django_user_model.objects.create_superuser("boss", password="x"))

    answer = staff.post("/admin/runs/createdtool/", {"action": "withdraw", "_selected_action": [tool.pk]})

    assert answer.status_code == 302
    tool.refresh_from_db()
    assert tool.status == "withdrawn"
    with pytest.raises(WorkflowValidationError, match="unknown tool 'city_greeting'"):
        register("extend/greeter")
