"""run_shell in the sandbox, as an attacker would try it: secrets out of
reach, nothing outlives a call, limits hold, hard links are refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agents import workspace_quota
from agents.events import ListSink
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.sandbox import SYSTEM_PATH, ProcessLimits, Sandbox
from agents.tools import ToolCallMeta, ToolContext, ToolRegistry, default_registry
from agents.tools.builtin.shell import lifeline_pipe, while_alive
from tests.runtime.processes import processes_running

pytestmark = pytest.mark.sandbox

CANARY = "sk-canary-8f14e45fceea167a5a36dedd4bea2543"
ROOT = Path(__file__).resolve().parents[2]


def ran(outcome) -> dict:
    """What run_shell answered: exit_code, output and a note, if any."""
    assert outcome.ok, outcome.text
    return json.loads(outcome.text)["result"]


def shell(workspace: Path, command: str, *, sandbox: Sandbox | None = None, timeout: int = 30, secrets=()):
    """One run_shell call through a registry, as a step's turn makes it."""
    registry = ToolRegistry(default_registry().tools(), secrets=secrets)
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
    arguments = json.dumps({"command": command, "timeout": timeout})
    return registry.call(ctx, "run_shell", arguments, registry.for_role("step", ["run_shell"]))


def limited(**limits) -> Sandbox:
    return Sandbox(limits=ProcessLimits(**limits))


@pytest.fixture
def secret_file(tmp_path) -> Path:
    """A file beside the workspace, as var/secret_key is beside var/workspaces."""
    path = tmp_path / "secret_key"
    path.write_text(CANARY)
    return path


def test_it_keeps_the_servers_environment_and_files_out_of_reach(workspace, secret_file, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    command = (
        f"env; cat /proc/*/environ; ps e; ps auxe; cat {secret_file}; ls {secret_file.parent} {ROOT}; "
        "ls ~root /root; cat /proc/1/environ; echo END"
    )

    outcome = shell(workspace, command)

    assert outcome.ok, outcome.text
    assert "END" in outcome.text
    assert CANARY not in outcome.text
    assert f"cat: {secret_file}: No such file or directory" in outcome.text
    assert f"ls: cannot access '{ROOT}': No such file or directory" in outcome.text


def test_it_lets_the_command_write_only_its_workspace_and_tmp(workspace):
    outcome = shell(workspace, "touch /usr/x /etc/x /x; echo t > /tmp/t && cat /tmp/t; echo w > here && cat here")

    assert ran(outcome)["exit_code"] == 0
    for path in ("/usr/x", "/etc/x", "/x"):
        assert f"touch: cannot touch '{path}'" in outcome.text
    assert "t\nw\n" in ran(outcome)["output"]
    assert (workspace / "here").read_text() == "w\n"


def test_it_reaches_no_network_unless_allowed(workspace):
    server = socket.create_server(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    command = f"(echo > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo unreachable"

    assert ran(shell(workspace, command))["output"].splitlines()[0] == "unreachable"
    assert ran(shell(workspace, command, sandbox=limited(network=True)))["output"].splitlines()[0] == "reached"
    server.close()


def test_a_setsid_background_process_does_not_outlive_the_call(workspace):
    outcome = shell(workspace, "setsid sleep 100.5 > /dev/null 2>&1 < /dev/null & echo started")

    assert outcome.ok and "started" in outcome.text
    assert processes_running("sleep 100.5") == []


def test_it_caps_the_number_of_processes(workspace):
    command = "for i in $(seq 30); do sleep 7.25 & done; echo spawned"

    outcome = shell(workspace, command, sandbox=limited(processes=8), timeout=4)

    assert "fork: retry: Resource temporarily unavailable" in outcome.text
    assert processes_running("sleep 7.25") == []


def test_it_caps_the_size_of_a_file(workspace):
    outcome = shell(workspace, "head -c 3000000 /dev/zero > big; echo status=$?", sandbox=limited(file_size_mb=1))

    assert "File size limit exceeded" in outcome.text
    assert (workspace / "big").stat().st_size == 1024 * 1024


def test_without_cgroups_it_caps_each_processs_cpu_time(workspace):
    # With them the whole call's is capped (test_sandbox_whole_call.py).
    started = time.monotonic()

    per_process = Sandbox(cgroup="off", limits=ProcessLimits(cpu_seconds=1))
    outcome = shell(workspace, "while :; do :; done", sandbox=per_process, timeout=20)

    assert time.monotonic() - started < 10
    assert ran(outcome)["exit_code"] == 137
    assert ran(outcome)["note"].startswith("killed by signal 9; a sandbox limit")


def test_without_cgroups_it_caps_each_processs_memory(workspace):
    command = "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo got ${#x}"

    outcome = shell(workspace, command, sandbox=Sandbox(cgroup="off", limits=ProcessLimits(memory_mb=64)))

    assert "got 200000000" not in outcome.text
    assert "bash: xrealloc: cannot allocate" in outcome.text


def test_it_stops_a_command_that_fills_the_disk_past_the_quota_where_it_is_only_checked(workspace, monkeypatch):
    # Where the workspace has a file system of its own, writes past it just
    # fail (tests/runtime/test_workspace_quota.py); here the host can mount none.
    monkeypatch.setattr(workspace_quota, "_CAPABILITY", ["simulated: the host has no loop devices"])
    command = "for i in $(seq 8); do head -c 1000000 /dev/zero > f$i; done; sleep 20"
    started = time.monotonic()

    outcome = shell(workspace, command, sandbox=limited(disk_mb=3, file_size_mb=2))

    # Stopped by the quota, not left to finish its 20 s sleep.
    assert time.monotonic() - started < 18
    assert not outcome.ok
    assert "past its disk quota of 3 MB" in outcome.text
    assert processes_running("sleep 20") == []
    # A call that frees space still runs in a full workspace.
    assert ran(shell(workspace, "rm f*; echo freed", sandbox=limited(disk_mb=3)))["output"] == "freed\n"


def test_it_refuses_run_shell_when_no_sandbox_can_start(workspace):
    outcome = shell(workspace, "touch ran", sandbox=Sandbox(bwrap="/nonexistent/bwrap"))

    assert not outcome.ok
    assert "bubblewrap ('/nonexistent/bwrap') is not installed" in outcome.text
    assert "apt-get install bubblewrap" in outcome.text and "ZENWEB_SANDBOX=off" in outcome.text
    assert not (workspace / "ran").exists()


def test_the_operators_opt_out_runs_unsandboxed_and_redaction_still_holds(workspace, secret_file):
    off = Sandbox(mode="off", bwrap="/nonexistent/bwrap")

    outcome = shell(workspace, f"echo key=$(cat {secret_file}); touch ran", sandbox=off, secrets=[CANARY])

    assert outcome.ok, outcome.text
    assert (workspace / "ran").exists()
    # Without the sandbox the command reads what the server can; only redaction stands between.
    assert "key=[redacted]" in outcome.text
    assert CANARY not in outcome.text


def test_a_killed_worker_leaves_no_process_of_the_call_behind(workspace):
    # A worker process running one call, killed mid-call as the OOM killer or a deploy would.
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                from pathlib import Path
                from tests.runtime.test_sandbox import shell
                shell(Path({str(workspace)!r}), "sh -c 'sleep 2.125; echo x >> f'")
                """
            ),
        ],
        cwd=ROOT,
    )
    deadline = time.monotonic() + 10
    while not processes_running_now("sleep 2.125") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_running_now("sleep 2.125"), "the command never started"

    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()

    assert processes_running("sleep 2.125") == []
    time.sleep(2.5)  # past the command's end: its write never comes
    assert not (workspace / "f").exists()


def started_while_alive(workspace: Path, command: str, lifeline: int, sandbox: Sandbox) -> subprocess.Popen:
    """``command`` started as run_shell starts it, its stdin the read end of
    ``lifeline``: the test process plays the worker holding the write end."""
    env = {"PATH": SYSTEM_PATH, "HOME": str(workspace)}
    sandbox.prepare(workspace)
    argv = sandbox.command(
        while_alive(["bash", "-c", command], sandboxed=sandbox.enabled), env=env, writable=workspace, cwd=workspace
    )
    return subprocess.Popen(argv, cwd=workspace, env=env, stdin=lifeline, start_new_session=True)


def test_a_command_whose_worker_died_while_the_sandbox_was_starting_never_runs(workspace):
    # Bubblewrap's namespace takes its parent-death signal only once it is
    # set up: a worker killed before that left the command to run on. Here
    # the worker is gone before the command could start.
    read_end, write_end = os.pipe()
    os.close(write_end)

    with started_while_alive(workspace, "echo x >> f", read_end, Sandbox()) as proc:
        os.close(read_end)
        assert proc.wait(timeout=10) == 137

    assert not (workspace / "f").exists()


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_command_stops_when_its_worker_is_gone_whatever_killed_it(workspace, mode):
    # No parent-death signal reaches it here (the test process lives on and
    # only lets go of the pipe): the watcher alone stops the command and,
    # in the sandbox, what it left in the background.
    background = "setsid sleep 30.25 > /dev/null 2>&1 < /dev/null & " if mode == "on" else ""
    command = f"{background}sleep 1.5 && echo x >> f"
    read_end, write_end = os.pipe()

    with started_while_alive(workspace, command, read_end, Sandbox(mode=mode)) as proc:
        os.close(read_end)
        deadline = time.monotonic() + 10
        while not processes_running_now("sleep 1.5") and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes_running_now("sleep 1.5"), "the command never started"
        os.close(write_end)
        assert proc.wait(timeout=5) != 0

    assert processes_running("sleep 30.25") == [] and processes_running("sleep 1.5") == []
    time.sleep(2)
    assert not (workspace / "f").exists()


def test_the_watcher_adds_nothing_to_a_commands_output(workspace):
    # bash reports a background job it killed ("watch: line 11: ... Killed")
    # unless told to forget it; that line came in about 1 call in 12.
    outputs = set()
    for _ in range(100):
        with lifeline_pipe() as lifeline:
            done = subprocess.run(
                while_alive(["bash", "-c", "echo 1"], sandboxed=False),
                stdin=lifeline,
                capture_output=True,
                text=True,
                start_new_session=True,
            )
        outputs.add(done.stdout + done.stderr)

    assert outputs == {"1\n"}


def processes_running_now(command_line: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip() == (
                command_line
            ):
                return True
        except OSError:
            continue  # it ended while we looked
    return False


def test_the_file_tools_refuse_hard_links_to_files_outside_the_workspace(workspace, secret_file):
    os.link(secret_file, workspace / "key")
    registry = default_registry()
    sink = ListSink()
    ctx = ToolContext(
        ToolCallMeta("run-1", "run-1/build", "build/1", "call-1"),
        "build",
        "step",
        MessageRouter(InMemoryMailboxStore(), sink),
        sink,
        injected={"workspace": str(workspace)},
    )
    tools = registry.for_role("step", ["read_file", "write_file", "edit_file", "grep"])

    def call(name: str, arguments: dict):
        return registry.call(ctx, name, json.dumps(arguments), tools)

    read = call("read_file", {"path": "key"})
    written = call("write_file", {"path": "key", "content": "owned"})
    edited = call("edit_file", {"path": "key", "old": CANARY, "new": "owned"})
    grepped = call("grep", {"pattern": "sk-"})

    for outcome in (read, written, edited):
        assert not outcome.ok
        assert "path 'key' is hard-linked (2 names); hard-linked files are refused" in outcome.text
    assert CANARY not in read.text and CANARY not in grepped.text
    assert secret_file.read_text() == CANARY


def test_the_file_tools_refuse_special_files_without_hanging(workspace):
    os.mkfifo(workspace / "pipe")
    registry = default_registry()
    sink = ListSink()
    ctx = ToolContext(
        ToolCallMeta("run-1", "run-1/build", "build/1", "call-1"),
        "build",
        "step",
        MessageRouter(InMemoryMailboxStore(), sink),
        sink,
        injected={"workspace": str(workspace)},
    )
    tools = registry.for_role("step", ["read_file"])

    outcome = registry.call(ctx, "read_file", json.dumps({"path": "pipe"}), tools)

    assert not outcome.ok
    assert "is a special file" in outcome.text


def test_a_workflows_limits_never_pass_the_operators_maxima():
    operator = ProcessLimits(processes=10, cpu_seconds=5, memory_mb=100, file_size_mb=2, disk_mb=3, network=False)
    asked = ProcessLimits(processes=50, cpu_seconds=1, memory_mb=1000, file_size_mb=1, disk_mb=30, network=True)

    assert asked.within(operator) == ProcessLimits(
        processes=10, cpu_seconds=1, memory_mb=100, file_size_mb=1, disk_mb=3, network=False
    )


def test_giving_the_workspace_to_the_sandbox_user_never_reaches_past_a_folder_swapped_for_a_symlink(
    workspace, tmp_path
):
    # As root, run_shell first gives the workspace's files to the uid
    # commands run as. Another command of the same turn swaps a folder for
    # a symlink out of the workspace and back, as fast as it can: the
    # file outside must stay root's.
    sandbox = Sandbox()
    if not sandbox.enabled or os.geteuid() != 0:
        pytest.skip("the workspace changes owner only when zenweb runs as root with the sandbox on")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("root's\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "f").write_text("the run's\n")
    (workspace / "x").symlink_to(outside)
    swap = textwrap.dedent(
        f"""
        import ctypes, time
        libc = ctypes.CDLL(None, use_errno=True)
        end = time.time() + 3
        while time.time() < end:
            libc.renameat2(-100, b"{workspace}/d", -100, b"{workspace}/x", 2)  # RENAME_EXCHANGE
        """
    )
    swapper = subprocess.Popen([sys.executable, "-c", swap])
    try:
        while swapper.poll() is None:
            sandbox.prepare(workspace)
            assert (outside / "f").stat().st_uid == 0
            assert outside.stat().st_uid == 0
            # Root's again, as a file tool's new files are, for the next prepare.
            for name in ("d", "x"):
                os.chown(workspace / name, 0, 0, follow_symlinks=False)
                if not (workspace / name).is_symlink():
                    os.chown(workspace / name / "f", 0, 0)
    finally:
        swapper.kill()
        swapper.wait()


def test_a_sandboxed_processs_variables_never_show_on_a_command_line_other_users_can_read(workspace, monkeypatch):
    # /proc/<pid>/cmdline is readable by every local user for as long as a
    # process runs (an MCP server: as long as its connection); the values
    # reach the command through bubblewrap's environment instead.
    monkeypatch.setenv("ZENWEB_TEST_HOST_ONLY", "the-host-keeps-this")
    sandbox = Sandbox()
    env = {"PATH": SYSTEM_PATH, "GH_PAT": "ghp_canary0123456789"}
    argv = sandbox.command(["bash", "-c", 'echo "$GH_PAT ${ZENWEB_TEST_HOST_ONLY:-unset}"; sleep 5'], env=env)
    # As a launcher that adds this process's variables starts it (the MCP
    # SDK adds its defaults, USER, SHELL and the like): they are unset inside.
    launched = {"ZENWEB_TEST_HOST_ONLY": os.environ["ZENWEB_TEST_HOST_ONLY"], **env}
    with subprocess.Popen(argv, env=launched, stdout=subprocess.PIPE, text=True) as proc:
        first = proc.stdout.readline().strip()
        command_lines = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in [proc.pid, *children(proc.pid)]]
        proc.kill()

    assert first == "ghp_canary0123456789 unset"
    assert command_lines and not any(b"ghp_canary" in line for line in command_lines)


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *children(int(child))]
    return found
