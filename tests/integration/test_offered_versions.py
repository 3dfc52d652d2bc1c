"""Only what is offered can start (issue 45.3): v1 (plain) of a workflow
whose v2 is destructive cannot be started by its id, from the form, a
command, the API or the action every start goes through; a retired version
is refused, and one staff re-enabled starts."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.actions import NotOffered, do_create_run, do_register_workflow, offered_workflows
from runs.actions.commands import do_command
from runs.models import Run, Workflow
from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db

# The same echo, now marked destructive: a start waits for an approval.
DESTRUCTIVE_ECHO = ECHO.replace(
    "description: Say the subject back.\n", "description: Say it, gated.\ndestructive: true\n"
)


@pytest.fixture
def versions() -> list[Workflow]:
    """echo v1 and v2 (plain), then v3 (destructive)."""
    v1 = do_register_workflow(ECHO, "echo.yaml")[0]
    v2 = do_register_workflow(ECHO.replace("Say the subject back.", "Say it back."), "echo.yaml")[0]
    v3 = do_register_workflow(DESTRUCTIVE_ECHO, "echo.yaml")[0]
    assert [w.version for w in (v1, v2, v3)] == [1, 2, 3]
    return [v1, v2, v3]


def test_no_older_version_of_a_destructive_workflow_starts_by_its_id(
    client, owner, versions, django_capture_on_commit_callbacks
):
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=False):
        for older in versions[:-1]:
            page = client.post("/runs/start/", {"workflow": older.pk, "inputs": "subject=x"})
            assert page.status_code == 409
            assert (
                f"echo v{older.version} is not its latest version (v3) and cannot be started: "
                f"the current version is v3 (id {versions[-1].pk})"
            ) in page.content.decode()
            with pytest.raises(NotOffered):
                do_create_run(older, {"subject": "x"}, user=owner)
    assert Run.objects.count() == 0


def test_a_command_and_the_api_start_only_the_current_version(owner, versions, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        command = do_command("echo for tides", user=owner)
        answer = post(api(owner), "/api/commands", {"command": "echo for waves"})
    assert answer.status_code == 201
    runs = Run.objects.order_by("pk")
    assert [(run.workflow.version, run.status) for run in runs] == [(3, "awaiting_approval")] * 2
    assert command.run == runs[0]


def _admin_action(action: str, staff, workflows: list[Workflow]) -> None:
    """Run an action of the admin's workflow list, as staff would."""
    admin = Client()
    admin.force_login(staff)
    answer = admin.post("/admin/runs/workflow/", {"action": action, "_selected_action": [w.pk for w in workflows]})
    assert answer.status_code == 302


def test_a_retired_version_is_refused_and_a_re_enabled_older_one_starts(
    client, owner, django_user_model, versions, django_capture_on_commit_callbacks
):
    admin_user = django_user_model.objects.create_superuser("boss", password="x")
    v1, v2, v3 = versions
    client.force_login(owner)
    _admin_action("retire", admin_user, [v3])
    with django_capture_on_commit_callbacks(execute=False):
        page = client.post("/runs/start/", {"workflow": v3.pk, "inputs": "subject=x"}, follow=True)
        assert "echo v3 is retired and cannot be started: no version of it is offered now" in page.content.decode()
        # Retiring the latest offers no older version in its place.
        assert (
            "is not its latest version"
            in client.post("/runs/start/", {"workflow": v1.pk, "inputs": "subject=x"}, follow=True).content.decode()
        )
        assert do_command("echo for tides", user=owner).run is None  # nothing offered to select

        _admin_action("re_enable", admin_user, [v1])
        started = client.post("/runs/start/", {"workflow": v1.pk, "inputs": "subject=x"})
        refused = client.post("/runs/start/", {"workflow": v2.pk, "inputs": "subject=x"}, follow=True)
    assert started.status_code == 302
    assert [(run.workflow.version, run.status) for run in Run.objects.all()] == [(1, "pending")]
    assert "echo v2 is not its latest version (v3) and cannot be started: the current version is v1" in (
        refused.content.decode()
    )
    assert list(Workflow.objects.order_by("version").values_list("offer", flat=True)) == [
        "enabled",
        "latest",
        "retired",
    ]


def test_a_file_run_ad_hoc_is_stored_for_its_run_and_offered_to_no_command(owner, django_capture_on_commit_callbacks):
    catalog = do_register_workflow(ECHO, "echo.yaml")[0]
    tried = ECHO.replace("Say the subject back.", "A local edit, tried once.")
    with django_capture_on_commit_callbacks(execute=False):
        ad_hoc, created = do_register_workflow(tried, "scratch/echo.yaml", ad_hoc=True)
        run = do_create_run(ad_hoc, {"subject": "x"}, command="run_workflow scratch/echo.yaml", ad_hoc=True)

        assert (created, ad_hoc.version, ad_hoc.offer) == (True, 2, Workflow.Offer.AD_HOC)
        assert run.workflow == ad_hoc
        # The catalog still offers its own version, to commands and the start form.
        command = do_command("echo for tides", user=owner)
        assert command.run.workflow == catalog
        with pytest.raises(NotOffered, match="stored for one run of its file"):
            do_create_run(ad_hoc, {"subject": "x"}, user=owner)

    # Registering the catalog's text again changes nothing; a new text is the next version.
    assert do_register_workflow(ECHO, "echo.yaml") == (catalog, False)
    assert do_register_workflow(ECHO.replace("back.", "back!"), "echo.yaml")[0].version == 3


def test_a_file_run_ad_hoc_of_a_new_name_is_not_in_the_catalog(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        scratch = do_register_workflow(ECHO.replace("name: echo", "name: scratch"), "scratch.yaml", ad_hoc=True)[0]
        do_create_run(scratch, {"subject": "x"}, ad_hoc=True)
        command = do_command("Run the scratch workflow for tides", user=owner)

    assert (command.status, command.result["error"]) == ("error", "Unknown workflow: scratch")
    assert "scratch" not in offered_workflows()
