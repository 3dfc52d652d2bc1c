"""Hostile inputs against the shipped cleanup_workspace (issue 25): an
approved run deletes its own target and nothing else; a target that leaves
the workspace is refused before anyone is asked to approve it."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from runs.actions import do_create_run
from runs.actions.approvals import do_decide
from runs.actions.catalog import InputError
from runs.models import Command, Run
from tests.conftest import register, wait_for_run
from tests.integration.api_client import api, post

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]


@pytest.fixture
def victim(celery_worker):
    """Another run's workspace, next to the ones cleanup_workspace runs in."""
    path = settings.ZENWEB_WORKSPACES / "run-7"
    path.mkdir(parents=True)
    (path / "report.txt").write_text("keep me")
    return path


def hostile_targets(marker) -> list[str]:
    return [
        f"build; touch {marker}",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"x; echo $(id -un) > {marker}",
        f"build && touch {marker}",
        f"'; touch {marker}; '",
    ]


@pytest.mark.parametrize("index", range(6))
def test_it_runs_no_command_hidden_in_the_target(victim, owner, approver, tmp_path, index):
    marker = tmp_path / "pwned"
    target = hostile_targets(marker)[index]
    run = do_create_run(register("cleanup_workspace"), {"target": target}, user=owner)

    do_decide(run.approvals.get().pk, approver, "approve", "looks like a folder name")

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    assert not marker.exists()
    assert (victim / "report.txt").read_text() == "keep me"
    # The target was one path, made and deleted inside the workspace.
    assert json.loads(run.tool_calls.get(name="run_shell").result)["result"]["exit_code"] == 0
    workspace = settings.ZENWEB_WORKSPACES / f"run-{run.pk}"
    assert (workspace / target.split("/")[0]).is_dir()
    assert not (workspace / target).exists()


@pytest.mark.parametrize(
    "target",
    ["../run-7", "../../etc", "/etc", "build/../../run-7", "~/x", "build\ntouch pwned", "build\rx", "-rf", "x\x00y"],
)
def test_it_refuses_a_target_outside_the_workspace_before_asking_anyone(victim, owner, target):
    with pytest.raises(InputError, match="input 'target' must be a path inside the run's workspace"):
        do_create_run(register("cleanup_workspace"), {"target": target}, user=owner)

    assert not Run.objects.exists()
    assert (victim / "report.txt").read_text() == "keep me"


def test_it_refuses_a_plain_users_command_aimed_at_another_run(victim, teammate):
    register("cleanup_workspace")

    response = post(api(teammate), "/api/commands", {"command": "clean up target=../run-2"})

    command = Command.objects.get()
    assert response.status_code < 500
    assert command.run is None and not Run.objects.exists()
    assert command.status == "error"
    assert "must be a path inside the run's workspace" in command.result["error"]
    assert "leads out of the workspace" in command.result["error"]
    assert (victim / "report.txt").read_text() == "keep me"
