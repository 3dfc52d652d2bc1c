"""The sandbox tool processes run in: a bubblewrap (``bwrap``) command line.

Each call gets a fresh PID namespace (when the call's outer process dies,
the kernel kills everything inside, ``setsid`` and ``&`` included, once
bubblewrap has set the namespace up: ``run_shell``'s watcher covers the
moments before, ``agents.tools.builtin.shell.while_alive``), an empty
environment plus an allow-list, read-only system directories, a private
``/proc``, ``/dev`` and size-limited ``/tmp``, and one writable directory
(the run's workspace). Nothing else of the host is mounted: not zenweb's
data directory (database, ``secret_key``), not the source tree, not other
runs' workspaces, not the server's home. No network unless asked for.

Limits are rlimits set by util-linux's ``prlimit`` inside the sandbox, hard
and soft, so the command cannot raise them. Linux never applies the
process-count limit to root, so when zenweb runs as root the command runs as
an unprivileged uid (``Sandbox.uid``); otherwise bubblewrap runs it in a user
namespace as the server's user. The workspace quota is the workspace's own
file system where the host can mount one, else checked by the caller while
the call runs (``agents.workspace_quota``).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

INSTALL_HINT = (
    "Install bubblewrap (`apt-get install bubblewrap`), or, to run tools without a sandbox, "
    "set ZENWEB_SANDBOX=off (every run that uses them then says so on its page)."
)
# The only variables a sandboxed process starts with, besides those named here by the caller.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Read-only system directories; a merged-/usr system's /bin, /lib... are symlinks into /usr.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc programs need (libraries, users, names, TLS roots, time zone,
# Debian's alternatives such as awk): not the whole of /etc, where a host may keep secrets.
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    "/etc/mime.types",
)
MB = 1024 * 1024


class SandboxUnavailable(RuntimeError):
    """No sandbox can start here; the message says why and how to enable one."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed call may use. ``cpu_seconds`` is CPU time, not
    wall time; ``memory_mb`` is address space (ulimit -v); ``file_size_mb``
    is the largest file it may write; ``disk_mb`` the workspace's size.
    0 means no limit (a long-lived MCP server has no CPU-time cap)."""

    processes: int = 256
    cpu_seconds: int = 300
    memory_mb: int = 4096
    file_size_mb: int = 1024
    disk_mb: int = 2048
    network: bool = False

    def within(self, maxima: Limits) -> Limits:
        """These limits, none past the operator's ``maxima``."""
        return Limits(
            processes=min(self.processes, maxima.processes),
            cpu_seconds=min(self.cpu_seconds, maxima.cpu_seconds),
            memory_mb=min(self.memory_mb, maxima.memory_mb),
            file_size_mb=min(self.file_size_mb, maxima.file_size_mb),
            disk_mb=min(self.disk_mb, maxima.disk_mb),
            network=self.network and maxima.network,
        )


@dataclass(frozen=True)
class Sandbox:
    """How tool processes start. ``mode`` ``off`` is the operator's explicit
    opt-out (ZENWEB_SANDBOX=off): commands then run as the server's user
    with only the environment allow-list and the rlimits."""

    mode: Literal["on", "off"] = "on"
    bwrap: str = "bwrap"
    # The uid commands run as when zenweb runs as root.
    uid: int = 65534
    limits: Limits = field(default_factory=Limits)
    # The workspace quota enforced by a file system of its own where the host
    # allows it (agents/workspace_quota.py); False: checked only (ZENWEB_WORKSPACE_QUOTA=checked).
    workspace_fs: bool = True

    @property
    def enabled(self) -> bool:
        return self.mode == "on"

    def with_limits(self, limits: Limits) -> Sandbox:
        return replace(self, limits=limits)

    def require(self) -> None:
        """Raise SandboxUnavailable (why, and how to enable it) unless a
        sandbox starts here, or the operator turned it off."""
        if not self.enabled:
            return
        problem = probe(self.bwrap)
        if problem:
            raise SandboxUnavailable(f"no sandbox can start: {problem}. {INSTALL_HINT}")

    def command(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        writable: Path | None = None,
        readonly: Iterable[Path] = (),
        cwd: Path | None = None,
    ) -> list[str]:
        """The command line that runs ``argv`` sandboxed (or, with the
        sandbox off, under the same rlimits), with exactly ``env``, which
        the caller passes to the process it starts: the values reach the
        command through bubblewrap's environment, never its command line,
        which every local user can read in /proc while a server runs (an
        MCP server's token). Whatever else that environment holds (a
        launcher's defaults: the MCP SDK adds USER, SHELL and the like from
        this process's) is unset by name.
        ``writable`` is the one directory it may change; ``readonly`` are
        extra directories it may read (an MCP server's own files)."""
        limited = [*_prlimit(self.limits), "--", *argv]
        if not self.enabled:
            return limited
        line = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if not self.limits.network:
            line.append("--unshare-net")
        for name in sorted(set(os.environ) - set(env)):
            line += ["--unsetenv", name]
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                line += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                line += ["--ro-bind", path, path]
        line += ["--perms", "0755", "--dir", "/etc"]
        for path in ETC_FILES:
            line += ["--ro-bind-try", path, path]
        line += ["--proc", "/proc", "--dev", "/dev"]
        # /tmp lives in memory: its size counts against the disk quota's figure.
        size = ["--size", str(self.limits.disk_mb * MB)] if self.limits.disk_mb > 0 else []
        line += ["--perms", "1777", *size, "--tmpfs", "/tmp"]
        binds = [("--ro-bind", Path(p)) for p in readonly] + ([("--bind", writable)] if writable else [])
        for flag, path in binds:
            # Directories bubblewrap makes on the way are root's and 0700 otherwise.
            for parent in reversed(path.parents):
                if str(parent) not in ("/", "/tmp"):
                    line += ["--perms", "0755", "--dir", str(parent)]
            line += [flag, str(path), str(path)]
        if cwd is not None:
            line += ["--chdir", str(cwd)]
        line.append("--")
        if os.geteuid() == 0:
            # Root would ignore the process-count limit and could undo the rest.
            line += [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.uid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        return [*line, *limited]

    def prepare(self, workspace: Path) -> None:
        """Give the workspace to the uid commands run as (root only): what
        the file tools wrote stays writable by the shell. Links are not
        followed, and a hard-linked file is left alone (it may be another
        directory's file). Each name is changed through its folder's
        descriptor, not by its path: a command of the same turn, running
        meanwhile, that swaps a folder for a symlink out of the workspace
        cannot turn this root's chown onto a file outside it."""
        if not self.enabled or os.geteuid() != 0:
            return
        for folder, name in _entries(workspace):
            try:
                info = os.stat(name, dir_fd=folder, follow_symlinks=False)
                if info.st_uid != self.uid and (stat.S_ISDIR(info.st_mode) or info.st_nlink == 1):
                    os.chown(name, self.uid, self.uid, dir_fd=folder, follow_symlinks=False)
            except OSError:
                continue


def _prlimit(limits: Limits) -> list[str]:
    def value(number: int, unit: int = 1) -> int | str:
        return number * unit if number > 0 else "unlimited"

    return [
        "prlimit",
        f"--nproc={value(limits.processes)}",
        f"--cpu={value(limits.cpu_seconds)}",
        f"--as={value(limits.memory_mb, MB)}",
        f"--fsize={value(limits.file_size_mb, MB)}",
    ]


def _entries(root: Path) -> Iterable[tuple[int | None, str]]:
    """``root`` (its path) and everything under it, each as (its folder's
    descriptor, its name): os.fwalk opens each folder from the one above it
    and skips one that is no longer the folder it listed (swapped for a
    symlink)."""
    yield None, str(root)
    for _parent, dirs, files, folder in os.fwalk(root):
        for name in [*dirs, *files]:
            yield folder, name


_WORKING: set[str] = set()


def probe(bwrap: str) -> str:
    """Why ``bwrap`` cannot start a sandbox here, or "" if it can. A
    success is remembered for the process; a failure is asked again at the
    next call, so installing bubblewrap needs no restart."""
    if bwrap in _WORKING:
        return ""
    problem = _probe(bwrap)
    if not problem:
        _WORKING.add(bwrap)
    return problem


def _probe(bwrap: str) -> str:
    found = shutil.which(bwrap)
    if not found:
        return f"bubblewrap ({bwrap!r}) is not installed"
    for tool in ("prlimit", "setpriv"):
        if not shutil.which(tool):
            return f"{tool} (util-linux) is not installed"
    line = Sandbox(bwrap=found).command(["true"], env={"PATH": SYSTEM_PATH})
    try:
        done = subprocess.run(line, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{found} did not start: {exc}"
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[:300]
        return f"{found} failed its probe (exit {done.returncode}: {why or 'no message'})"
    return ""
