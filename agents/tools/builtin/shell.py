"""The shell toolset: run_shell runs a bash command in the run's workspace.

The child gets a minimal environment (never the parent's, where API keys
live), a timeout that kills its whole process group, and a cap on output.
Commands matching DESTRUCTIVE_PATTERNS are refused unless the run was approved
for destructive work. The patterns catch accidents; they are not a sandbox.
"""

from __future__ import annotations

import codecs
import os
import re
import selectors
import shutil
import signal
import subprocess
import threading
import time

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.base import Tool, ToolContext, ToolError
from agents.tools.builtin.files import workspace_root
from agents.tools.results import MAX_RESULT_CHARS

MAX_TIMEOUT = 120
MAX_COMMAND_CHARS = 10_000
# Leaves room for the exit code line and the truncation note under the
# registry's result cap, so the model sees the output rather than a preview.
MAX_OUTPUT_CHARS = MAX_RESULT_CHARS - 1_000
# How long to keep reading after bash exits while a background child still holds the pipe.
DRAIN_SECONDS = 0.5

# Where a command word starts: the beginning, after a separator, or after a prefix such as sudo.
_AT_COMMAND = r"(?:^|[;&|(`{]|\$\()\s*(?:(?:sudo|doas|exec|nohup|command|xargs|env|time|then|do|else)\s+(?:-\S+\s+)*)*"

DESTRUCTIVE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), description)
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
        (r"([^\s(){};|&]+)\s*\(\)\s*\{[^}]*\1\s*\|\s*\1", "fork bomb (:(){ :|:& };:)"),
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
    """What makes ``command`` destructive, or None."""
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


def _pump(proc: subprocess.Popen[bytes], output: _Output, deadline: float, cancelled: threading.Event) -> bool:
    """Read the child's output until bash is done; False if the deadline, or
    a cancel, came first."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if now >= deadline or cancelled.is_set():
                return False
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
        return False
    return True


# A command dies with the worker that runs it (Linux's parent-death signal,
# set by util-linux's setpriv): a worker killed mid-call must not leave the
# command running on, or the retry of that call would overlap it.
_DIE_WITH_WORKER = ("setpriv", "--pdeathsig", "KILL", "--") if shutil.which("setpriv") else ()


def _run_shell(ctx: ToolContext, args: RunShellArgs) -> str:
    reason = destructive_reason(args.command)
    if reason and not ctx.destructive_approved:
        raise ToolError(
            f"refused: the command looks like {reason}, and this run is not approved for destructive work. "
            "Find a non-destructive way, or report that a person must approve it.",
            kind="domain_rejection",
            action="replan",
        )
    root = workspace_root(args.workspace)
    tmp = root / ".tmp"
    tmp.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(root), "LANG": "C.UTF-8", "TMPDIR": str(tmp)}
    output = _Output(MAX_OUTPUT_CHARS)
    with subprocess.Popen(
        [*_DIE_WITH_WORKER, "bash", "-c", args.command],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    ) as proc:
        try:
            finished = _pump(proc, output, time.monotonic() + args.timeout, ctx.cancelled)
        finally:
            # Also stops whatever the command left running in the background.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if not finished:
        tail = output.text()[-2_000:]
        if ctx.cancelled.is_set():
            raise ToolError(
                f"stopped: the step ended while the command ran; it was killed. Last output:\n{tail or '(none)'}",
                kind="unavailable",
                action="finish",
            )
        raise ToolError(
            f"timed out after {args.timeout}s; the command was stopped. Last output:\n{tail or '(none)'}",
            kind="timeout",
            action="correct_call" if args.timeout < MAX_TIMEOUT else "replan",
            fields=["timeout"] if args.timeout < MAX_TIMEOUT else [],
        )
    code = proc.returncode
    status = f"exit code: {code}"
    if code < 0:
        status += f" (killed by signal {-code})"
    return f"{status}\n{output.text() or '(no output)'}"


RUN_SHELL = Tool(
    "run_shell",
    "Run a bash command in the workspace directory and return its exit code and combined output "
    f"(stdout and stderr, cut in the middle past {MAX_OUTPUT_CHARS} chars). The environment is minimal: "
    "no credentials. Destructive commands (rm -r, git push --force, ...) are refused unless the run allows them.",
    RunShellArgs,
    frozenset({"step"}),
    _run_shell,
    toolset="shell",
    tags=("execution", "destructive-capable"),
    injected=("workspace",),
    # Its own timeout stops the command; this one catches a stuck tool.
    timeout=MAX_TIMEOUT + 30,
)

SHELL_TOOLS = (RUN_SHELL,)
