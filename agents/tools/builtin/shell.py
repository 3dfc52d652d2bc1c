"""The shell toolset: run_shell runs a bash command in the run's workspace.

The command runs in the sandbox (``agents.sandbox``): its own PID namespace,
an allow-listed environment (never the parent's, where API keys live), the
workspace as the only writable and visible directory of the host, and
limits on processes, CPU, memory, file size and the workspace's size. A
timeout or a cancel kills the namespace, so nothing it started outlives the
call. Where no sandbox can start, run_shell is refused unless the operator
turned the sandbox off.

DESTRUCTIVE_PATTERNS is NOT a security control: quoting, variables or any
interpreter get past a regex (``"rm" -rf``, ``python3 -c 'shutil.rmtree()'``).
It only catches obvious accidents and tells the approval screen what a
command looks like; the sandbox is what bounds a command.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from agents import linear_regex, workspace_quota
from agents.sandbox import SYSTEM_PATH, ProcessLimits, Sandbox, SandboxUnavailable
from agents.sandbox_cgroups import CallGroup, NoGroup
from agents.tools.base import Tool, ToolContext, ToolError
from agents.tools.builtin.result_models import MAX_OUTPUT_CHARS, RunShellResult, ShellRun
from agents.tools.builtin.workspace import quota_of, workspace_root
from agents.tools.results import ToolAnswer
from agents.workspace_quota import Growth, Quota

MAX_TIMEOUT = 120
MAX_COMMAND_CHARS = 10_000
# How long to keep reading after bash exits while a background child still holds the pipe.
DRAIN_SECONDS = 0.5
# How often the workspace's size is measured while a command runs.
QUOTA_CHECK_SECONDS = 0.5

# Where a command word starts: the beginning, after a separator, or after a prefix such as sudo.
_AT_COMMAND = r"(?:^|[;&|(`{]|\$\()\s*(?:(?:sudo|doas|exec|nohup|command|xargs|env|time|then|do|else)\s+(?:-\S+\s+)*)*"


class _ForkBomb:
    """``name(){ ... name | name ... }``. Its name twice more is a
    backreference, which RE2 cannot express: the definition is found first,
    then its name in its body, each in linear time."""

    _DEFINITION = linear_regex.compile(r"([^\s(){};|&]+)\s*\(\)\s*\{([^}]*)")

    def search(self, command: str) -> Any:
        for found in self._DEFINITION.finditer(command):
            name = re.escape(found.group(1))
            if linear_regex.compile(rf"{name}\s*\|\s*{name}").search(found.group(2)):
                return found
        return None


# Matched with RE2, in time linear in the command: a model writes it, and
# with Python's re `git push ` 1,100 times holds the GIL 30 s.
DESTRUCTIVE_PATTERNS: tuple[tuple[Any, str], ...] = tuple(
    (linear_regex.compile(pattern, ignore_case=True) if isinstance(pattern, str) else pattern, description)
    for pattern, description in (
        (r"\brm\s+(?:[^;&|]*\s)?(?:-[a-z]*r[a-z]*|--recursive)\b", "recursive delete (rm -r)"),
        (
            r"\bgit\s+(?:[^;&|]*\s)?push\b[^;&|]*\s(?:--force\S*|-[a-z]*f[a-z]*\b|\+\S)",
            "force push (git push --force)",
        ),
        (r"\bgit\s+(?:[^;&|]*\s)?reset\b[^;&|]*\s--hard\b", "discarding changes (git reset --hard)"),
        (
            r"\bgit\s+(?:[^;&|]*\s)?clean\b[^;&|]*\s(?:-[a-z]*f[a-z]*\b|--force\b)",
            "deleting untracked files (git clean -f)",
        ),
        (r"\bmkfs\b", "formatting a file system (mkfs)"),
        (r"\bdd\b[^;&|]*\bof=", "raw write with dd (dd of=)"),
        (
            # chmod -r only removes read permission: the recursive flag is a capital R.
            r"\bch(?:mod|own|grp)\s+(?:[^;&|]*\s)?(?:(?-i:-[a-zA-Z]*R[a-zA-Z]*)|--recursive)\b",
            "recursive permission or owner change (chmod -R, chown -R)",
        ),
        (r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk)", "writing to a disk device (> /dev/sd*)"),
        (
            _AT_COMMAND + r"(?:systemctl\s+)?(?:shutdown|reboot|halt|poweroff)\b",
            "shutting down or rebooting the machine",
        ),
        (_ForkBomb(), "fork bomb (:(){ :|:& };:)"),
        (r"\bfind\b[^;&|]*\s-delete\b", "deleting files with find -delete"),
    )
)


class RunShellArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(
        min_length=1, max_length=MAX_COMMAND_CHARS, description="Bash command line, run in the workspace directory."
    )
    timeout: int = Field(default=30, ge=1, le=MAX_TIMEOUT, description="Seconds before the command is stopped.")
    workspace: str = Field(description="The run's workspace directory (injected).")


def destructive_reason(command: str) -> str | None:
    """What makes ``command`` look destructive, or None. A hint for the
    approval screen and a guard against accidents, not a security control
    (see the module's docstring): the sandbox is the boundary."""
    for pattern, description in DESTRUCTIVE_PATTERNS:
        if pattern.search(command):
            return description
    return None


class _Output:
    """Combined output; past ``cap`` chars only its start and end are kept."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.tail_cap :]

    def text(self) -> str:
        shown = len(self.head) + len(self.tail)
        if shown == self.total:
            return self.head + self.tail
        return f"{self.head}\n[output truncated: {shown} of {self.total} chars shown, the middle left out]\n{self.tail}"


class _Quota:
    """The workspace's disk quota where no file system of its own enforces
    it (agents/workspace_quota.py), checked while the command runs: past it,
    and grown since the call began (so a call that deletes still runs), the
    command is stopped, and what it added past the quota is deleted."""

    def __init__(self, root: Path, quota: Quota, enforced: bool) -> None:
        self.growth = None if enforced or quota.disk_mb <= 0 else Growth(root, quota)
        self.checked = time.monotonic()

    def exceeded(self, now: float | None = None) -> bool:
        if now is not None and now - self.checked < QUOTA_CHECK_SECONDS:
            return False
        self.checked = time.monotonic()
        return self.growth is not None and self.growth.exceeded()

    def trim(self) -> str:
        """Once the command is dead: what it added past the quota, deleted, as the model is told."""
        if self.growth is None:
            return ""
        deleted: list[str] = []
        # The sandbox's processes die a moment after bubblewrap: trim again until a pass finds nothing past it.
        for _ in range(20):
            more = self.growth.trim()
            if not more:
                break
            deleted += more
            time.sleep(0.1)
        if not deleted:
            return ""
        shown = ", ".join(deleted[:10]) + (f" and {len(deleted) - 10} more" if len(deleted) > 10 else "")
        return f" What it added past the quota was deleted, newest first: {shown}."


def _pump(
    proc: subprocess.Popen[bytes],
    output: _Output,
    deadline: float,
    cancelled: threading.Event,
    quota: _Quota,
    group: CallGroup | NoGroup,
) -> str:
    """Read the child's output until bash is done; "" if it was, else what
    came first: "timeout", "cancelled", "quota", or from the call's cgroup
    "memory" (the kernel killed a process of it) or "cpu" (it used its CPU
    seconds, all its processes together): the whole call is stopped then."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if stopped := _stop_reason(now, deadline, cancelled, quota, group):
                return stopped
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > DRAIN_SECONDS:
                break
            if selector.select(min(deadline - now, 0.05)):
                chunk = os.read(fd, 65_536)
                if not chunk:
                    break
                output.add(decoder.decode(chunk))
    output.add(decoder.decode(b"", final=True))
    try:
        proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return "timeout"
    return "quota" if quota.exceeded() else group.exceeded()


def _stop_reason(
    now: float, deadline: float, cancelled: threading.Event, quota: _Quota, group: CallGroup | NoGroup
) -> str:
    """Why the call must stop at ``now`` ("" while it may run on): the
    first of "cancelled", "timeout", "quota", or its cgroup's "memory" or "cpu"."""
    if cancelled.is_set():
        return "cancelled"
    if now >= deadline:
        return "timeout"
    if quota.exceeded(now):
        return "quota"
    return group.exceeded()


# A command runs only while the worker that started it lives: a worker killed
# mid-call must not leave the command running on, or the retry of that call
# would repeat its side effect. Its stdin is a pipe whose write end only the
# worker holds (``lifeline_pipe``) and never writes to, so the pipe reads as
# closed exactly when the worker is gone. The watcher below checks that
# before the command starts, and waits on it while the command runs: then it
# kills what the command started (in the sandbox every process of its PID
# namespace, without the sandbox the command's process group).
# Parent-death signals cannot do this alone: bubblewrap's namespace init sets
# its --die-with-parent only once the sandbox is set up, and a worker killed
# before that would leave the whole namespace running (about 1 call in 3
# when killed within 40 ms of the start on a loaded machine).
_WATCH = r"""
everything=$1; shift
exec 3<&0 </dev/null
read -r -t 0 <&3 && exit 137
{ read -r _ <&3; kill -s KILL -- "$everything"; } &
watcher=$!
disown "$watcher"
"$@" 3<&-
status=$?
kill -s KILL -- "$watcher" 2>/dev/null
exit "$status"
"""


def while_alive(argv: list[str], *, sandboxed: bool) -> list[str]:
    """``argv`` under the watcher, whose stdin must be a ``lifeline_pipe``. In
    the sandbox's own PID namespace ``kill -1`` reaches only the command's
    processes; outside it, the process group is what it can safely reach."""
    return ["bash", "-c", _WATCH, "watch", "-1" if sandboxed else "0", *argv]


@contextlib.contextmanager
def lifeline_pipe() -> Iterator[int]:
    """The read end of a pipe whose write end this process holds until the
    block ends (not inherited: Python's pipes are close-on-exec)."""
    read_end, write_end = os.pipe()
    try:
        yield read_end
    finally:
        os.close(write_end)
        os.close(read_end)


@contextlib.contextmanager
def _whole_call(sandbox: Sandbox) -> Iterator[CallGroup | NoGroup]:
    """The call's own cgroup (``Sandbox.call_group``), removed with what is
    left in it when the block ends; refused if the host has cgroups but
    this one cannot be made."""
    try:
        group = sandbox.call_group()
    except SandboxUnavailable as exc:
        raise ToolError(f"refused: run_shell cannot run here, {exc}", kind="unavailable", action="finish") from None
    with group:
        yield group


class CommandRun(NamedTuple):
    """A command that ran to its end: its exit code, as text (the exit code
    line, a note on the quota, the bounded output: what a created tool
    answers), and as run_shell answers it (``shell``)."""

    exit_code: int
    text: str
    shell: ShellRun


def _run_shell(ctx: ToolContext, args: RunShellArgs) -> ToolAnswer:
    ran = run_command(ctx, args.command, args.timeout, args.workspace)
    return ToolAnswer(ran.shell.model_dump(exclude_none=True))


def run_command(
    ctx: ToolContext, command: str, timeout: int, workspace: str, data: Mapping[str, str] | None = None
) -> CommandRun:
    """Run ``command`` with bash in the run's sandbox and workspace, as
    run_shell does (its limits, timeout and output cap); ``data`` are
    variables added to its environment (a created tool's input: data,
    never part of the command line). Raises ToolError when it may not
    run or was stopped before it ended."""
    sandbox = _sandbox_for(ctx, command)
    limit = quota_of(ctx)
    root = workspace_root(workspace, limit)
    sandbox.prepare(root)
    env = {"PATH": SYSTEM_PATH, "HOME": str(root), "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp", **(data or {})}
    if not sandbox.enabled:
        # No private /tmp without the sandbox: temporary files stay in the run's workspace.
        tmp = root / ".tmp"
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
    quota = _Quota(root, limit, enforced=os.path.ismount(root))
    output = _Output(MAX_OUTPUT_CHARS)
    with (
        _whole_call(sandbox) as group,
        lifeline_pipe() as lifeline,
        subprocess.Popen(
            sandbox.command(
                while_alive(["bash", "-c", command], sandboxed=sandbox.enabled),
                env=env,
                writable=root,
                cwd=root,
                group=group,
            ),
            cwd=root,
            env=env,
            stdin=lifeline,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ) as proc,
    ):
        try:
            stopped = _pump(proc, output, time.monotonic() + timeout, ctx.cancelled, quota, group)
            used = group.cpu_seconds()
        finally:
            # Also stops whatever the command left running in the background
            # (with the sandbox: killing bwrap ends its whole PID namespace).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    trimmed = quota.trim()
    if trimmed:
        stopped = "quota"  # past the quota when it timed out or was cancelled: that is what it must hear
    if stopped:
        raise _stopped(stopped, output.text()[-2_000:], sandbox.limits, limit.disk_mb, used, trimmed, timeout)
    full = workspace_quota.full_now(root, limit)
    code = proc.returncode
    notes = [_signal_note(code), f"{full}: the file system refused writes past it" if full else ""]
    shell = ShellRun(exit_code=code, note="; ".join(n for n in notes if n) or None, output=output.text())
    note = f"\nnote: {full}: the file system refused writes past it." if full else ""
    return CommandRun(code, f"{_exit_status(code)}{note}\n{output.text() or '(no output)'}", shell)


def _sandbox_for(ctx: ToolContext, command: str) -> Sandbox:
    """The sandbox ``command`` runs in; a ToolError if it may not run (a
    destructive command in a run not approved for one) or cannot run here."""
    reason = destructive_reason(command)
    if reason and not ctx.destructive_approved:
        raise ToolError(
            f"refused: the command looks like {reason}, and this run is not approved for destructive work. "
            "Find a non-destructive way, or report that a person must approve it.",
            kind="domain_rejection",
            action="replan",
        )
    sandbox = ctx.sandbox or Sandbox()
    try:
        sandbox.require()
    except SandboxUnavailable as exc:
        raise ToolError(f"refused: run_shell cannot run here, {exc}", kind="unavailable", action="finish") from None
    return sandbox


def _stopped(
    stopped: str, tail: str, limits: ProcessLimits, disk_mb: int, used: float, trimmed: str, timeout: float
) -> ToolError:
    """What the model is told of a command stopped before it ended: why
    (``stopped``, as ``_pump`` says it), the limit it hit, its last output."""
    last = f"Last output:\n{tail or '(none)'}"
    if stopped == "cancelled":
        return ToolError(
            f"stopped: the step ended while the command ran; it was killed. {last}",
            kind="unavailable",
            action="finish",
        )
    if stopped == "memory":
        return ToolError(
            f"stopped: the command's processes together needed more than its memory limit of "
            f"{limits.memory_mb} MB; the whole call was killed. Use less memory at once (fewer "
            f"processes, smaller inputs). {last}",
            kind="domain_rejection",
            action="replan",
        )
    if stopped == "cpu":
        return ToolError(
            f"stopped: the command used {used:.1f} CPU-seconds, its limit of {limits.cpu_seconds} "
            f"counted over all its processes; the whole call was killed. {last}",
            kind="domain_rejection",
            action="replan",
        )
    if stopped == "quota":
        return ToolError(
            f"stopped: the workspace grew past its disk quota of {disk_mb} MB; the command was "
            f"killed.{trimmed} Delete files you do not need. {last}",
            kind="domain_rejection",
            action="replan",
        )
    return ToolError(
        f"timed out after {timeout}s; the command was stopped. {last}",
        kind="timeout",
        action="correct_call" if timeout < MAX_TIMEOUT else "replan",
        fields=["timeout"] if timeout < MAX_TIMEOUT else [],
    )


def _exit_status(code: int) -> str:
    note = _signal_note(code)
    return f"exit code: {code} ({note})" if note else f"exit code: {code}"


def _signal_note(code: int) -> str:
    if code < 0:
        return f"killed by signal {-code}"
    if code > 128:
        # bash and bwrap report a command killed by signal N as 128 + N;
        # SIGKILL and SIGXCPU are how the CPU-time limit stops one.
        return f"killed by signal {code - 128}; a sandbox limit, CPU time or memory, may have stopped it"
    return ""


RUN_SHELL = Tool(
    "run_shell",
    "Run a bash command in the workspace directory and return its exit code and combined output "
    f"(stdout and stderr, cut in the middle past {MAX_OUTPUT_CHARS} chars). It runs in a sandbox: only "
    "the workspace is writable, no credentials, no network unless the workflow allows it, limits on "
    "processes, CPU, memory, file size and disk; nothing it starts outlives the call. "
    "Destructive commands (rm -r, git push --force, ...) are refused unless the run allows them.",
    RunShellArgs,
    frozenset({"step"}),
    _run_shell,
    toolset="shell",
    result_model=RunShellResult,
    tags=("execution", "destructive-capable"),
    injected=("workspace",),
    # Its own timeout stops the command; this one catches a stuck tool.
    timeout=MAX_TIMEOUT + 30,
)

SHELL_TOOLS = (RUN_SHELL,)
