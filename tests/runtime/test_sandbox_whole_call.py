"""The sandbox's limits for a whole call, as an attacker would test them:
many processes each under a per-process cap together far past it, one run
starving another, a user namespace made inside to become root there.

These need cgroups (root here and in CI); a host without them skips
unless CI=true."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.events import ListSink
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.sandbox import OWN_PROCESSES, SYSTEM_PATH, ProcessLimits, Sandbox, at_start
from agents.sandbox_cgroups import CallGroup, controls, sweep
from agents.tools import ToolCallMeta, ToolContext, ToolRegistry, default_registry
from agents.tools.mcp import McpServerConfig
from agents.tools.mcp.servers import McpServer
from tests.mcp.servers import EVERYTHING, require_servers
from tests.runtime.mcp_calls import call
from tests.runtime.processes import processes_running

ROOT = Path(__file__).resolve().parents[2]
REPORT = controls()

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not REPORT.complete and os.environ.get("CI") != "true",
        reason=f"needs cgroups for whole-call limits: {REPORT.describe()}",
    ),
]


def shell(workspace: Path, command: str, sandbox: Sandbox, *, timeout: int = 30, cancelled=None):
    """One run_shell call, as a step's turn makes it."""
    registry = ToolRegistry(default_registry().tools())
    sink = ListSink()
    ctx = ToolContext(
        ToolCallMeta("run-1", "run-1/build", "build/1", "call-1"),
        "build",
        "step",
        MessageRouter(InMemoryMailboxStore(), sink),
        sink,
        injected={"workspace": str(workspace)},
        sandbox=sandbox,
    )
    if cancelled is not None:
        ctx.cancelled = cancelled
    arguments = json.dumps({"command": command, "timeout": timeout})
    return registry.call(ctx, "run_shell", arguments, registry.for_role("step", ["run_shell"]))


def limited(**limits) -> Sandbox:
    return Sandbox(limits=ProcessLimits(**limits))


def count_running(command_line: str) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().replace(b"\0", b" ").strip() == (
                command_line.encode()
            ):
                count += 1
        except OSError:
            continue  # it ended while we looked
    return count


def groups_of_this_process() -> list[Path]:
    mine = f"call-{os.getpid()}-"
    return [path for parent in set(REPORT.dirs.values()) for path in parent.glob(f"{mine}*")]


@pytest.fixture(autouse=True)
def no_group_left() -> Iterator[None]:
    yield
    assert groups_of_this_process() == []


class Background:
    """A call running in a thread until ``stop``: another call meanwhile."""

    def __init__(self, workspace: Path, command: str, sandbox: Sandbox) -> None:
        self.cancelled = threading.Event()
        self.outcome = None
        self.thread = threading.Thread(target=self._run, args=(workspace, command, sandbox))
        self.thread.start()

    def _run(self, workspace: Path, command: str, sandbox: Sandbox) -> None:
        self.outcome = shell(workspace, command, sandbox, timeout=60, cancelled=self.cancelled)

    def wait_for(self, command_line: str, count: int) -> None:
        deadline = time.monotonic() + 30
        while count_running(command_line) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert count_running(command_line) >= count, f"fewer than {count} of {command_line!r} started"

    def stop(self) -> None:
        self.cancelled.set()
        self.thread.join(timeout=30)


def test_eight_processes_of_180_mb_under_memory_256_are_killed_as_a_whole(workspace):
    # Each holds 180 MB (its address space stays under a 256 MB rlimit):
    # 1.4 GB together, passed before.
    hold = "head -c 188743680 /dev/zero | tail -c 188743680 | sleep 40.25"
    command = f"for i in $(seq 8); do ({hold}) & done; wait; echo all $((4 * 2)) held"

    outcome = shell(workspace, command, limited(memory_mb=256), timeout=60)

    assert not outcome.ok
    assert "needed more than its memory limit of 256 MB; the whole call was killed" in outcome.text
    assert "all 8 held" not in outcome.text
    assert processes_running("sleep 40.25") == []


def test_six_busy_children_under_cpu_seconds_3_stop_at_3_cpu_seconds_together(workspace):
    # Each child's own CPU-time rlimit was 3 s: together they used 18.
    command = "for i in $(seq 6); do (while :; do :; done) & done; wait"

    outcome = shell(workspace, command, limited(cpu_seconds=3), timeout=60)

    assert not outcome.ok
    used = re.search(
        r"the command used ([\d.]+) CPU-seconds, its limit of 3 counted over all its processes", outcome.text
    )
    assert used, outcome.text
    assert 3.0 <= float(used[1]) < 6.0


def test_the_process_limit_counts_the_calls_own_processes_all_and_only_them(workspace):
    sandbox = limited(processes=8)
    # All of them: the ninth fork of one call is refused.
    outcome = shell(workspace, "for i in $(seq 30); do sleep 7.25 & done; echo spawned", sandbox, timeout=4)
    assert "fork: retry: Resource temporarily unavailable" in outcome.text
    assert processes_running("sleep 7.25") == []

    # Only them: another call of the same run (same uid) holding 6 does not
    # count against this one, as the uid's count did.
    other = Background(workspace, "for i in $(seq 6); do sleep 30.75 & done; wait", sandbox)
    try:
        other.wait_for("sleep 30.75", 6)
        outcome = shell(workspace, "for i in $(seq 6); do sleep 0.5 & done; wait; echo $((3 * 2)) ran", sandbox)
    finally:
        other.stop()

    assert outcome.ok and "6 ran" in outcome.text, outcome.text
    assert "fork" not in outcome.text
    assert processes_running("sleep 30.75") == []


UNSHARE = "unshare -Ur id -u 2>&1 && echo user-namespace-made || echo user-namespace-refused"


def test_no_user_namespace_can_be_made_inside(workspace):
    outcome = shell(workspace, UNSHARE, Sandbox())

    assert outcome.ok, outcome.text
    assert "user-namespace-refused" in outcome.text and "user-namespace-made" not in outcome.text


def test_no_user_namespace_can_be_made_inside_when_zenweb_is_not_root(monkeypatch, tmp_path):
    # The command line a server that is not root builds, run as such a server (nobody).
    monkeypatch.setattr("agents.sandbox.os.geteuid", lambda: 65534)
    line = Sandbox().command(["bash", "-c", UNSHARE], env={"PATH": SYSTEM_PATH}, cwd=Path("/tmp"))
    monkeypatch.undo()
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    done = subprocess.run([*as_nobody, *line], env={"PATH": SYSTEM_PATH}, capture_output=True, text=True, cwd="/")

    assert done.returncode == 0, done.stderr
    assert "user-namespace-refused" in done.stdout and "user-namespace-made" not in done.stdout


@pytest.mark.parametrize("cgroup", ["", "off"], ids=["with-cgroups", "rlimits-only"])
def test_each_run_has_its_own_uid_and_one_runs_processes_do_not_starve_anothers(tmp_path, cgroup):
    if os.geteuid() != 0:
        pytest.skip("each run gets a uid of its own only when zenweb runs as root")
    operator = Sandbox(cgroup=cgroup)
    first, second = operator.for_run(1), operator.for_run(2)
    workspaces = [tmp_path / "run-1", tmp_path / "run-2"]
    for path in workspaces:
        path.mkdir()
    # Run 1 holds as many processes as it may (256): each run's commands
    # count against a uid of its own, not one that all sandboxes share.
    hog = Background(workspaces[0], "for i in $(seq 300); do sleep 45.5 & done; wait", first)
    try:
        hog.wait_for("sleep 45.5", 240)
        outcome = shell(workspaces[1], "echo from run 2; touch mine", second)
    finally:
        hog.stop()

    assert outcome.ok and "from run 2" in outcome.text, outcome.text
    assert "fork" not in outcome.text
    assert first.uid != second.uid
    assert (workspaces[1] / "mine").stat().st_uid == second.uid
    assert processes_running("sleep 45.5") == []


def test_a_call_leaves_no_cgroup_behind_whatever_ended_it(workspace):
    sandbox = limited(cpu_seconds=1)
    shell(workspace, "echo done", sandbox)
    shell(workspace, "setsid sleep 50.5 > /dev/null 2>&1 < /dev/null & while :; do :; done", sandbox)
    shell(workspace, "sleep 30", sandbox, timeout=1)

    assert groups_of_this_process() == []
    assert processes_running("sleep 50.5") == []


def test_the_groups_of_a_process_that_died_mid_call_are_removed_at_the_next_start(tmp_path):
    # A worker killed mid-call: its call's group and what ran in it stay,
    # until a worker starts and sweeps them.
    script = textwrap.dedent(
        """
        import os, subprocess
        from agents.sandbox_cgroups import CallGroup, controls
        group = CallGroup.create(controls(), memory_bytes=64 << 20, processes=4)
        out = subprocess.DEVNULL
        subprocess.Popen(group.wrap(["sleep", "61.5"]), start_new_session=True, stdout=out, stderr=out)
        print(group.dirs["processes"].name, flush=True)
        os._exit(0)
        """
    )
    name = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    left = [parent / name.strip() for parent in set(REPORT.dirs.values())]
    assert all(path.is_dir() for path in left)
    deadline = time.monotonic() + 10
    while count_running("sleep 61.5") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count_running("sleep 61.5") == 1

    removed = sweep(REPORT)

    assert removed >= len(left)
    assert not any(path.exists() for path in left)
    assert processes_running("sleep 61.5") == []


def test_neither_a_live_calls_group_nor_one_of_another_pid_namespace_is_swept():
    # Another pid namespace's worker (another container): its pids mean nothing here.
    foreign = REPORT.dirs["processes"] / f"call-{2**22 + 1}-1-1-1"
    foreign.mkdir()
    try:
        with CallGroup.create(REPORT, processes=4) as group:
            sweep(REPORT)
            assert all(path.is_dir() for path in group.dirs.values())
        assert foreign.is_dir()
    finally:
        foreign.rmdir()


def test_a_worker_says_once_at_start_where_limits_hold_per_process_only(caplog):
    caplog.set_level(logging.INFO, logger="agents.sandbox")

    at_start(Sandbox())
    at_start(Sandbox(cgroup="off"))

    (whole, per_process) = caplog.records
    assert whole.levelno == logging.INFO and "whole-call limits: cgroup v" in whole.getMessage()
    assert per_process.levelno == logging.WARNING
    assert "whole-call limits: none (ZENWEB_SANDBOX_CGROUP=off)" in per_process.getMessage()


def test_the_report_says_what_is_enforced_and_how():
    described = REPORT.describe()
    assert described.startswith(f"whole-call limits: cgroup v{REPORT.version}: memory (")
    assert f"processes (pids.max in {REPORT.dirs['processes']})" in described and "per process only" not in described
    off = Sandbox(cgroup="off").whole_call()
    assert off.describe() == (
        "whole-call limits: none (ZENWEB_SANDBOX_CGROUP=off); memory, processes and CPU time are "
        "limited per process only (rlimits)"
    )


def test_a_stdio_mcp_server_has_a_cgroup_of_its_own_for_as_long_as_it_lives(local_mcp_servers_allowed):
    require_servers()
    config = McpServerConfig(name="grouped", command=str(EVERYTHING), args=["stdio"])
    server = McpServer(config, limited(memory_mb=512, processes=40))
    try:
        assert call(server, "echo", {"message": "hi"}).ok
        names = {path.name for path in groups_of_this_process()}
        assert len(names) == 1, names
        group = names.pop()
        assert (REPORT.dirs["processes"] / group / "cgroup.procs").read_text().split(), "the server is not in it"
        memory = "memory.max" if REPORT.version == 2 else "memory.limit_in_bytes"
        # Its memory, not its address space (which a JavaScript runtime reserves by the gigabyte).
        assert int((REPORT.dirs["memory"] / group / memory).read_text()) == 512 * 1024 * 1024
        assert int((REPORT.dirs["processes"] / group / "pids.max").read_text()) == 40 + OWN_PROCESSES
    finally:
        server.close()

    assert groups_of_this_process() == []
