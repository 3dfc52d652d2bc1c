"""The workspace disk quota, attacked as a prompt-injected model would:
preallocation, files unlinked while held open, the file tools, a flood of
empty files. Where the host can mount (root, loop devices: CI) the
workspace's own file system refuses them; where it cannot, what a call
grew past the quota is deleted when it ends (agents/workspace_quota.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agents import workspace_quota
from agents.sandbox import ProcessLimits, Sandbox
from agents.tools.builtin.workspace import workspace_root
from agents.workspace_quota import MB, Quota, files_for, image_of, usage
from tests.runtime.test_sandbox import shell
from tests.runtime.tool_agent import Agent, result_of
from tests.workspace_mounts import loops_under, mounts_under

pytestmark = pytest.mark.sandbox

# ext4 on a quota under 512 MB has 1 KiB blocks, 8 MB to a block group.
BLOCK_GROUP = 8 * MB

# Without root and loop devices the file system cannot be mounted: skipped
# with the reason, except under CI=true (CI runs as root), where it must run.
_why_not = workspace_quota.unavailable()
_skip = bool(_why_not) and os.environ.get("CI") != "true"
needs_mounts = pytest.mark.skipif(_skip, reason=f"needs a mountable workspace: {_why_not}")


@pytest.fixture
def unmountable(monkeypatch):
    """A host where no workspace can have a file system of its own."""
    monkeypatch.setattr(workspace_quota, "_CAPABILITY", ["simulated: the host has no loop devices"])


def quota(disk_mb: int) -> Sandbox:
    return Sandbox(limits=ProcessLimits(disk_mb=disk_mb))


def on_host(workspace: Path) -> int:
    """What the workspace takes of the host's disk: its image, or its files."""
    image = image_of(workspace)
    return image.stat().st_blocks * 512 if image.exists() else usage(workspace)[0]


def writer(workspace: Path, disk_mb: int) -> Agent:
    agent = Agent(workspace)
    agent.ctx.sandbox = quota(disk_mb)
    return agent


FALLOCATE_BURST = "for i in $(seq 30); do fallocate -l 60M f$i; done; ls | wc -l"
# Open a file, write 60 MB, unlink it and keep it open, 20 times: invisible to any walk of the workspace.
UNLINKED_BURST = """python3 - <<'EOF'
import os
held, total = [], 0
try:
    for i in range(20):
        handle = open(f"u{i}", "wb")
        os.unlink(f"u{i}")
        held.append(handle)
        for _ in range(60):
            handle.write(b"x" * 1048576)
            handle.flush()
            total += 1
except OSError as exc:
    print("refused:", exc.strerror)
print("held MB:", total)
EOF"""
EMPTY_FILES = """python3 -c '
made = 0
try:
    for i in range(200000):
        open(f"f{i}", "w").close()
        made += 1
except OSError as exc:
    print("refused:", exc.strerror)
print("made:", made)'"""


@needs_mounts
def test_a_fallocate_burst_leaves_the_workspace_within_its_quota(workspace):
    outcome = shell(workspace, FALLOCATE_BURST, sandbox=quota(64))

    assert usage(workspace)[0] <= 64 * MB + BLOCK_GROUP
    assert on_host(workspace) <= 64 * MB + BLOCK_GROUP
    assert "No space left on device" in outcome.text


@needs_mounts
def test_files_unlinked_while_held_open_count_against_the_quota(workspace):
    outcome = shell(workspace, UNLINKED_BURST, sandbox=quota(64), timeout=60)

    held = int(result_of(outcome)["result"]["output"].split("held MB:")[1].split()[0])
    assert held <= 64
    assert "refused: No space left on device" in outcome.text
    assert on_host(workspace) <= 64 * MB + BLOCK_GROUP


@needs_mounts
def test_two_hundred_thousand_empty_files_are_refused_past_the_inode_cap(workspace):
    outcome = shell(workspace, EMPTY_FILES, sandbox=quota(8), timeout=60)

    assert usage(workspace)[1] <= files_for(8) < 1_000
    assert "refused: No space left on device" in outcome.text
    assert f"the workspace's limit of {files_for(8)} files and folders is reached" in outcome.text


@pytest.mark.parametrize("host", ["mountable", "unmountable"])
def test_write_file_past_the_quota_is_refused_and_the_old_file_kept(workspace, host, request):
    if host == "mountable" and _skip:
        pytest.skip(f"needs a mountable workspace: {_why_not}")
    if host == "unmountable":
        request.getfixturevalue("unmountable")
    agent = writer(workspace, 1)
    assert agent.call("write_file", {"path": "keep.txt", "content": "kept\n"}).ok
    refusals = []
    for n in range(10):
        outcome = agent.call("write_file", {"path": f"big{n}.txt", "content": "x" * 250_000})
        if not outcome.ok:
            refusals.append((n, outcome.text))

    assert refusals, "ten writes of 250 kB all fit a quota of 1 MB"
    first, text = refusals[0]
    assert "refused: the workspace quota of 1 MB is full; nothing was written" in text
    assert "Traceback" not in text
    assert not (workspace / f"big{first}.txt").exists()
    assert usage(workspace)[0] <= MB
    # An edit that would grow a file past the quota leaves it as it was.
    edit = agent.call("edit_file", {"path": "keep.txt", "old": "kept", "new": "y" * 250_000})
    assert not edit.ok and "workspace quota of 1 MB is full" in edit.text
    assert (workspace / "keep.txt").read_text() == "kept\n"


def test_a_call_on_a_host_that_cannot_mount_has_what_it_grew_past_the_quota_deleted(workspace, unmountable):
    before = writer(workspace, 64).call("write_file", {"path": "notes.md", "content": "written before\n"})
    assert before.ok

    outcome = shell(workspace, FALLOCATE_BURST + "; sleep 20", sandbox=quota(64))

    assert not outcome.ok
    assert "past its disk quota of 64 MB; the command was killed" in outcome.text
    assert "What it added past the quota was deleted, newest first: f" in outcome.text
    assert usage(workspace)[0] <= 64 * MB
    assert (workspace / "notes.md").read_text() == "written before\n"
    assert not image_of(workspace).exists()
    # A call that frees space still runs in a full workspace.
    freed = shell(workspace, "rm -f f*; echo freed", sandbox=quota(64))
    assert result_of(freed)["result"]["output"] == "freed\n"


def test_the_checked_quota_counts_files_too(workspace, unmountable):
    outcome = shell(workspace, EMPTY_FILES + "; sleep 20", sandbox=quota(8), timeout=60)

    assert not outcome.ok and "past its disk quota of 8 MB" in outcome.text
    assert usage(workspace)[1] <= files_for(8)


@needs_mounts
def test_the_workspace_is_mounted_again_after_the_host_restarts(workspace):
    agent = writer(workspace, 16)
    assert agent.call("write_file", {"path": "notes.md", "content": "kept across a restart\n"}).ok
    assert mounts_under(workspace) == [workspace]
    workspace_quota._unmount(workspace)  # what a reboot does
    assert not (workspace / "notes.md").exists()

    read = Agent(workspace).call("read_file", {"path": "notes.md"})

    assert read.ok and "kept across a restart" in read.text
    assert mounts_under(workspace) == [workspace]


@needs_mounts
def test_workers_asking_at_once_mount_one_file_system(workspace):
    errors = []

    def use() -> None:
        try:
            workspace_root(str(workspace), Quota(16))
        except Exception as exc:  # noqa: BLE001 (the assertion below shows it)
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert mounts_under(workspace) == [workspace]
    assert len(loops_under(workspace.parent)) == 1


@needs_mounts
def test_removing_a_workspace_unmounts_it_and_frees_its_loop_device(workspace):
    assert writer(workspace, 16).call("write_file", {"path": "a.txt", "content": "a"}).ok
    assert len(loops_under(workspace.parent)) == 1

    workspace_quota.remove(workspace)

    assert mounts_under(workspace.parent) == []
    assert loops_under(workspace.parent) == []
    assert not workspace.exists() and not image_of(workspace).exists()


def test_a_workspace_written_before_keeps_its_files_under_the_checked_quota(workspace):
    (workspace / "old.txt").write_text("from before the upgrade\n")

    assert writer(workspace, 16).call("write_file", {"path": "new.txt", "content": "new"}).ok

    assert (workspace / "old.txt").read_text() == "from before the upgrade\n"
    assert not image_of(workspace).exists()
