"""Commands end to end: the coordinator selects from the catalog, a run
starts (or an answer explains why not), and the COORDINATOR_RESULT follows
the run to its end."""

from __future__ import annotations

import pytest
from django.conf import settings

from runs.actions.approvals import do_decide
from runs.actions.commands import do_command
from runs.models import Command, Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def catalog(celery_worker):
    for name in ("research", "code_edit", "cleanup_workspace", "commands/sourceless", "commands/counter"):
        register(name)


def finished(command: Command) -> Command:
    wait_for_run(command.run)
    command.refresh_from_db()
    return command


def test_it_runs_the_selected_workflow_and_reports_claims_with_sources(catalog, owner):
    command = do_command("Run research workflow for laptops under $1000", user=owner)

    assert command.run.workflow.name == "research"
    assert command.run.inputs == {"query": "laptops under $1000"}
    command = finished(command)
    result = command.result
    assert result["_type"] == "COORDINATOR_RESULT"
    assert (result["status"], result["workflow_selected"]) == ("success", "research")
    assert [c["source_ref"] for c in result["claims"]] == ["shop-aster-swift-14", "rev-aster-swift-14"]
    assert result["claims"][0]["url"] == "https://shop.example.net/p/aster-swift-14-16-512"
    assert {"tool": "search", "status": "success"}.items() <= result["tool_runs"][0].items()
    claim = command.run.claims.first()
    assert claim.expires_at is not None and not claim.is_expired


def test_it_asks_what_was_meant_and_starts_nothing(catalog, owner):
    command = do_command("Get the thing", user=owner)

    assert command.run is None
    assert command.status == "needs_clarification"
    assert {o["would_select"] for o in command.result["clarification_options"]} >= {"research", "code_edit"}
    assert not Run.objects.exists()


def test_it_blocks_a_code_mode_workflow_in_chat_mode(catalog, owner):
    command = do_command("Run code_edit for path=notes.md", user=owner, mode="chat")

    assert command.run is None
    assert command.result["status"] == "blocked"
    assert command.result["error"] == "code_edit workflow requires code mode - currently in chat mode"


def test_it_runs_a_code_mode_workflow_in_code_mode(catalog, owner):
    command = finished(do_command("Run code_edit for path=notes.md", user=owner, mode="code"))

    assert command.status == "success"
    assert command.run.mode == "code"
    assert (settings.ZENWEB_WORKSPACES / f"run-{command.run.pk}" / "notes.md").read_text() == "hello from zenweb\n"


def test_it_names_a_missing_input(catalog, owner):
    command = do_command("Run code_edit workflow", user=owner, mode="code")

    assert command.run is None
    assert (command.status, command.result["missing"]) == ("needs_more_info", ["path"])


def test_it_names_an_input_of_the_wrong_type(catalog, owner):
    command = do_command("Run counter workflow with count=many", user=owner)

    assert command.run is None
    assert command.status == "error"
    assert command.result["error"].startswith("Invalid parameter count: expected integer")


def test_it_answers_a_foreach_input_that_is_not_a_list_without_starting_a_run(catalog, owner):
    register("regions_foreach")

    command = do_command("ship regions='[1, 2'", user=owner)

    command.refresh_from_db()  # the answer was stored
    assert command.run is None and not Run.objects.exists()
    assert (command.status, command.result["workflow_selected"]) == ("error", "regions_foreach")
    assert command.result["error"].startswith("regions_foreach: forEach input 'regions' is not a valid JSON list")


def test_it_holds_a_destructive_command_for_approval(catalog, owner, approver):
    command = do_command("Run cleanup workspace workflow", user=owner)

    assert command.run.status == Run.Status.AWAITING_APPROVAL
    assert (command.status, command.result["requires_approval"]) == ("blocked", True)
    do_decide(command.run.approvals.get().pk, approver, "approve", "it is only build output")
    command = finished(command)
    assert command.status == "success"
    assert "deleted build" in command.run.tool_calls.get(name="run_shell").result


def test_it_reports_a_rejected_destructive_command_as_blocked(catalog, owner, approver):
    command = do_command("Run cleanup workspace workflow", user=owner)

    do_decide(command.run.approvals.get().pk, approver, "reject", "keep the build")

    command.refresh_from_db()
    assert command.status == "blocked"
    assert command.result["error"] == "rejected by approver: keep the build"


def test_it_blocks_a_result_whose_claims_lack_sources(catalog, owner):
    command = finished(do_command("Run sourceless workflow about the rumour", user=owner))

    assert command.run.status == Run.Status.COMPLETED
    assert (command.status, command.result["requires_retry"]) == ("blocked", True)
    assert command.result["error"] == "Missing source metadata in workflow results"


def test_it_runs_exactly_the_regions_and_topic_a_command_says(celery_worker, owner):
    register("regions_foreach")
    register("hub_and_spoke")

    deploy = do_command("deploy to eu and us", user=owner)
    summary = do_command("summarize tablets", user=owner)
    unclear = do_command("deploy to eu or us", user=owner)

    run = wait_for_run(deploy.run)
    assert run.inputs == {"regions": "eu,us"}
    ships = sorted(run.steps.filter(step_id__endswith=".ship").values_list("step_id", flat=True))
    assert ships == ["deploy[0].ship", "deploy[1].ship"]
    assert wait_for_run(summary.run).inputs == {"topic": "tablets"}
    assert (unclear.run, unclear.status, unclear.result["missing"]) == (None, "needs_clarification", ["regions"])
    assert Run.objects.count() == 2
