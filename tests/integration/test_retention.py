"""manage.py purge_runs: the runs that ended before a date go, with what they
hold and their workspaces; runs under way and recent ones stay."""

from __future__ import annotations

import os
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from agents import workspace_quota
from agents.tools.builtin.workspace import workspace_root
from runs.actions import do_create_run, retention
from runs.actions.tool_host import workspace_of
from runs.models import Event, Message, Run, Step, ToolCall
from runs.sweeper import do_sweep
from tests.conftest import register, wait_for_run
from tests.workspace_mounts import loops_under, mounts_under

pytestmark = pytest.mark.django_db(transaction=True)


def purge(*args: str) -> str:
    out = StringIO()
    call_command("purge_runs", *args, stdout=out)
    return out.getvalue().strip()


def test_it_deletes_the_runs_that_ended_before_the_cutoff_with_what_they_hold(celery_worker, settings, tmp_path):
    settings.ZENWEB_WORKSPACES = str(tmp_path / "workspaces")
    workflow = register("relay")
    old, recent = (wait_for_run(do_create_run(workflow, {"subject": subject})) for subject in ("old", "recent"))
    Run.objects.filter(pk=old.pk).update(finished=timezone.now() - timedelta(days=40))
    started_long_ago = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING)
    Run.objects.filter(pk=started_long_ago.pk).update(created=timezone.now() - timedelta(days=40))
    workspace_of(old.pk).mkdir(parents=True)
    (workspace_of(old.pk) / "notes.txt").write_text("old work")
    events = old.events.count()
    assert events > 3 and old.messages.exists() and old.tool_calls.exists()

    would = purge("--older-than", "30", "--dry-run")
    assert would.startswith(f"would delete 1 runs ({events} events) that ended before ")
    assert Run.objects.filter(pk=old.pk).exists()

    retention.EVENTS_AT_ONCE = 3  # several statements for one run's events
    try:
        done = purge("--older-than", "30")
    finally:
        retention.EVENTS_AT_ONCE = 10_000

    assert done.startswith(f"deleted 1 runs ({events} events) that ended before ")
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk, started_long_ago.pk}
    for model in (Event, Message, Step, ToolCall):
        assert not model.objects.filter(run_id=old.pk).exists(), model.__name__
    assert not workspace_of(old.pk).exists()
    assert recent.events.count() > 3 and recent.steps.exists()


def test_it_refuses_a_cutoff_that_is_not_in_the_past():
    with pytest.raises(CommandError, match="--older-than must be a positive number of days, got 0"):
        purge("--older-than", "0")


@pytest.mark.sandbox
def test_a_purged_workspace_with_its_own_file_system_leaves_no_mount_image_or_loop_device(settings, tmp_path):
    if workspace_quota.unavailable() and os.environ.get("CI") != "true":
        pytest.skip(f"needs a mountable workspace: {workspace_quota.unavailable()}")
    settings.ZENWEB_WORKSPACES = tmp_path / "workspaces"
    run = Run.objects.create(workflow=register("relay"), status=Run.Status.COMPLETED)
    Run.objects.filter(pk=run.pk).update(finished=timezone.now() - timedelta(days=40))
    root = workspace_root(str(workspace_of(run.pk)), workspace_quota.Quota(16))
    (root / "notes.txt").write_text("old work")
    assert mounts_under(tmp_path) == [root] and len(loops_under(tmp_path)) == 1

    assert purge("--older-than", "30").startswith("deleted 1 runs")

    assert mounts_under(tmp_path) == []
    assert loops_under(tmp_path) == []
    assert not workspace_of(run.pk).exists() and not workspace_quota.image_of(root).exists()


@pytest.mark.sandbox
def test_a_sweep_unmounts_the_workspaces_of_ended_runs_and_a_tool_mounts_one_again(settings, tmp_path):
    if workspace_quota.unavailable() and os.environ.get("CI") != "true":
        pytest.skip(f"needs a mountable workspace: {workspace_quota.unavailable()}")
    settings.ZENWEB_WORKSPACES = tmp_path / "workspaces"
    workflow = register("relay")
    ended, recent, running = (
        Run.objects.create(workflow=workflow, status=status)
        for status in (Run.Status.COMPLETED, Run.Status.CANCELLED, Run.Status.RUNNING)
    )
    Run.objects.filter(pk=ended.pk).update(finished=timezone.now() - timedelta(minutes=10))
    Run.objects.filter(pk=recent.pk).update(finished=timezone.now())
    roots = {
        run.pk: workspace_root(str(workspace_of(run.pk)), workspace_quota.Quota(16)) for run in (ended, recent, running)
    }
    (roots[ended.pk] / "notes.txt").write_text("kept")
    assert len(mounts_under(tmp_path)) == 3

    assert do_sweep()["workspaces_released"] == 1

    # Only the run that ended more than RELEASE_AFTER ago lets go; its image stays.
    assert sorted(mounts_under(tmp_path)) == sorted([roots[recent.pk], roots[running.pk]])
    assert loops_under(tmp_path) and len(loops_under(tmp_path)) == 2
    assert workspace_quota.image_of(roots[ended.pk]).exists()
    assert do_sweep()["workspaces_released"] == 0

    # A resumed run's tool finds its files where they were.
    again = workspace_root(str(workspace_of(ended.pk)), workspace_quota.Quota(16))
    assert (again / "notes.txt").read_text() == "kept"
    assert len(mounts_under(tmp_path)) == 3


@pytest.mark.sandbox
def test_a_workspace_still_held_by_a_process_stays_mounted_until_it_lets_go(settings, tmp_path):
    if workspace_quota.unavailable() and os.environ.get("CI") != "true":
        pytest.skip(f"needs a mountable workspace: {workspace_quota.unavailable()}")
    settings.ZENWEB_WORKSPACES = tmp_path / "workspaces"
    run = Run.objects.create(workflow=register("relay"), status=Run.Status.CANCELLED)
    Run.objects.filter(pk=run.pk).update(finished=timezone.now() - timedelta(minutes=10))
    root = workspace_root(str(workspace_of(run.pk)), workspace_quota.Quota(16))
    holder = open(root / "held.txt", "w")  # noqa: SIM115 - held across the sweep on purpose
    try:
        assert do_sweep()["workspaces_released"] == 0
        assert mounts_under(tmp_path) == [root]
    finally:
        holder.close()
    assert do_sweep()["workspaces_released"] == 1
    assert mounts_under(tmp_path) == []
