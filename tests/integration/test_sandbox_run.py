"""A model that runs shell commands to find zenweb's secrets, on a real
worker with the openai provider (the local fake endpoint): what it finds
never reaches a request, an event, a log line, an export or a tool result."""

from __future__ import annotations

import io
import json
import logging
import os
import socket

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command

from agents import workspace_quota
from agents.sandbox import ProcessLimits, Sandbox
from runs.actions import do_create_run
from runs.export import export_run
from runs.models import Run, ToolCall
from tests.conftest import register, wait_for_run
from zenweb.celery import _say_how_disk_quotas_hold
from zenweb.management.commands.serve import _disk_quota

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]

CANARY = "sk-canary-c4ca4238a0b923820dcc509a6f75849b"


def probe_calls() -> list[tuple[str, str, str]]:
    database = django_settings.DATABASES["default"]["NAME"]
    commands = [
        "env",
        "cat /proc/*/environ | tr '\\0' '\\n'",
        "ps e; ps auxe",
        f"cat {django_settings.DATA_DIR / 'secret_key'}",
        f"cat {database} | head -c 4000",
        "cat ~/../../../var/secret_key; ls /; ls $HOME/..",
    ]
    return [(f"call_{n}", "run_shell", json.dumps({"command": command})) for n, command in enumerate(commands)]


def everything_stored(run: Run) -> str:
    return json.dumps(export_run(run), default=str) + json.dumps(
        list(ToolCall.objects.filter(run=run).values()), default=str
    )


def test_a_canary_key_never_leaves_the_server(celery_worker, openai_endpoint, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    openai_endpoint.push_tool_calls(probe_calls())
    openai_endpoint.push_text("Found nothing.")
    secret_key = django_settings.SECRET_KEY

    run = wait_for_run(do_create_run(register("sandbox/prober"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED, run.error
    results = [call.result for call in ToolCall.objects.filter(run=run, name="run_shell").order_by("pk")]
    assert len(results) == 6 and all("exit_code" in json.loads(r)["result"] for r in results), results
    assert "No such file or directory" in results[3] and "No such file or directory" in results[4]
    # The model saw every result: the second request carries them.
    second = openai_endpoint.requests[1].body
    assert [m["tool_call_id"] for m in second["messages"] if m["role"] == "tool"] == [c[0] for c in probe_calls()]
    for secret in (CANARY, secret_key):
        assert all(secret not in json.dumps(request.body) for request in openai_endpoint.requests)
        assert secret not in everything_stored(run)
        assert secret not in caplog.text


def test_run_shell_is_refused_with_how_to_when_no_sandbox_can_start(celery_worker, openai_endpoint, settings):
    settings.ZENWEB_SANDBOX = Sandbox(bwrap="/nonexistent/bwrap")
    openai_endpoint.push_tool_calls([("call_0", "run_shell", json.dumps({"command": "touch ran"}))])
    openai_endpoint.push_text("Could not.")

    run = wait_for_run(do_create_run(register("sandbox/prober"), {}), timeout=60)

    result = ToolCall.objects.get(run=run, name="run_shell").result
    assert (
        "run_shell cannot run here, no sandbox can start: bubblewrap ('/nonexistent/bwrap') is not installed" in result
    )
    assert "apt-get install bubblewrap" in result
    assert not (django_settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "ran").exists()


def test_the_opt_out_runs_unsandboxed_redacts_and_says_so_on_the_run_page(
    celery_worker, openai_endpoint, settings, client, staff
):
    settings.ZENWEB_SANDBOX = Sandbox(mode="off", bwrap="/nonexistent/bwrap")
    command = f"echo key=$(cat {django_settings.DATA_DIR / 'secret_key'}); touch ran"
    openai_endpoint.push_tool_calls([("call_0", "run_shell", json.dumps({"command": command}))])
    openai_endpoint.push_text("Done.")

    run = wait_for_run(do_create_run(register("sandbox/prober"), {}), timeout=60)

    assert (django_settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "ran").exists()
    # Unsandboxed, the command read the key file; redaction kept its value from the model and the record.
    assert "key=[redacted]" in ToolCall.objects.get(run=run, name="run_shell").result
    assert django_settings.SECRET_KEY not in json.dumps(openai_endpoint.requests[1].body)
    assert django_settings.SECRET_KEY not in everything_stored(run)
    client.force_login(staff)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-unsandboxed"' in html and "ZENWEB_SANDBOX=off" in html


@pytest.fixture
def listener():
    """Something to reach on the loopback interface (the port limited.yaml names)."""
    with socket.create_server(("127.0.0.1", 47613), reuse_port=True) as server:
        server.listen(8)
        yield server


def test_a_workflow_sets_its_own_limits_within_the_operators(celery_worker, settings, listener):
    run = wait_for_run(do_create_run(register("sandbox/limited"), {}), timeout=60)

    result = ToolCall.objects.get(run=run, name="run_shell").result
    assert "size=1048576" in result  # the workflow's 1 MB, under the operator's 1024
    assert "net=unreachable" in result  # asked for, but the operator allows no network

    settings.ZENWEB_SANDBOX = Sandbox(limits=ProcessLimits(network=True, file_size_mb=2))
    run = wait_for_run(do_create_run(register("sandbox/limited"), {}), timeout=60)

    result = ToolCall.objects.get(run=run, name="run_shell").result
    assert "size=1048576" in result and "net=reached" in result


def test_a_workflows_disk_quota_holds_against_a_preallocation_burst_and_the_run_page_says_how(
    celery_worker, client, staff, monkeypatch
):
    if workspace_quota.unavailable() and os.environ.get("CI") != "true":
        pytest.skip(f"needs a mountable workspace: {workspace_quota.unavailable()}")

    run = wait_for_run(do_create_run(register("sandbox/disk_quota"), {}), timeout=60)

    workspace = django_settings.ZENWEB_WORKSPACES / f"run-{run.pk}"
    assert run.status == Run.Status.COMPLETED, run.error
    # ext4 under 512 MB: 1 KiB blocks, a block group of 8 MB.
    assert workspace_quota.usage(workspace)[0] <= (64 + 8) * workspace_quota.MB
    assert "No space left on device" in ToolCall.objects.get(run=run, name="run_shell").result
    # What the burst left fills the quota: the file tools count against the same one.
    written = ToolCall.objects.get(run=run, name="write_file").result
    assert "refused: the workspace quota of 64 MB is full; nothing was written" in written, written
    assert not (workspace / "notes.md").exists()
    client.force_login(staff)
    assert 'id="run-disk-quota-checked"' not in client.get(f"/runs/{run.pk}/").content.decode()

    # A host that can mount no file system for a workspace says so on the page.
    monkeypatch.setattr(workspace_quota, "_CAPABILITY", ["the host has no loop devices (simulated)"])
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-disk-quota-checked"' in html and "the host has no loop devices (simulated)" in html


def test_a_runs_commands_run_as_the_runs_own_uid(celery_worker, openai_endpoint):
    if os.geteuid() != 0:
        pytest.skip("each run gets a uid of its own only when zenweb runs as root")
    sandbox = django_settings.ZENWEB_SANDBOX
    runs = []
    for _ in range(2):
        openai_endpoint.push_tool_calls([("call_0", "run_shell", json.dumps({"command": "touch mine"}))])
        openai_endpoint.push_text("Done.")
        runs.append(wait_for_run(do_create_run(register("sandbox/prober"), {}), timeout=60))

    owners = [(django_settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "mine").stat().st_uid for run in runs]
    assert owners == [sandbox.uid_base + run.pk % sandbox.uid_count for run in runs]
    assert owners[0] != owners[1]


def test_the_run_page_says_when_a_hosts_limits_hold_per_process_only(
    celery_worker, openai_endpoint, settings, client, staff
):
    openai_endpoint.push_text("Nothing to run.")
    run = wait_for_run(do_create_run(register("sandbox/prober"), {}), timeout=60)
    client.force_login(staff)

    settings.ZENWEB_SANDBOX = Sandbox(cgroup="off")
    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert 'id="run-limits-per-process"' in html
    assert "whole-call limits: none (ZENWEB_SANDBOX_CGROUP=off)" in html


def test_sandbox_report_says_what_this_host_enforces_and_how():
    out = io.StringIO()

    call_command("sandbox_report", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "sandbox: bubblewrap"
    assert lines[1].startswith("whole-call limits: ")
    assert any(line.startswith("user namespaces inside: closed") for line in lines)


@pytest.fixture
def host_without_cgroups(settings):
    settings.ZENWEB_SANDBOX = Sandbox(cgroup="off")


def test_a_worker_on_a_host_without_cgroups_warns_once_at_start(host_without_cgroups, caplog, celery_worker):
    started = caplog.get_records("setup")
    warned = [r.getMessage() for r in started if r.name == "agents.sandbox" and r.levelno == logging.WARNING]

    assert len(warned) == 1
    assert "whole-call limits: none (ZENWEB_SANDBOX_CGROUP=off)" in warned[0]


def test_serve_and_a_worker_say_at_start_whether_disk_quotas_are_enforced(monkeypatch, caplog):
    monkeypatch.setattr(workspace_quota, "_CAPABILITY", [""])
    assert _disk_quota() == "workspace disk quotas: enforced, each workspace its own file system"
    _say_how_disk_quotas_hold()
    assert not caplog.records

    monkeypatch.setattr(workspace_quota, "_CAPABILITY", ["the host has no loop devices (simulated)"])
    assert _disk_quota() == (
        "workspace disk quotas: only checked every 0.5 s, not enforced (the host has no loop devices (simulated))"
    )
    _say_how_disk_quotas_hold()
    (warning,) = caplog.records
    assert warning.levelname == "WARNING" and "the host has no loop devices (simulated)" in warning.getMessage()
