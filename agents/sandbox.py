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

Memory, processes and CPU time are limited for the whole call by a cgroup
of its own where the host allows it (``agents.sandbox_cgroups``; the call
is killed as a whole past them); otherwise, and for what no cgroup holds,
by rlimits set by util-linux's ``prlimit`` inside the sandbox, hard and
soft, so the command cannot raise them. When zenweb runs as root each run's
commands run as an unprivileged uid of the run's own (``Sandbox.for_run``):
Linux never applies the process-count limit to root, and runs that shared a
uid shared that count; otherwise bubblewrap runs them in a user namespace as
the server's user. Either way no user namespace can be made inside
(bubblewrap's ``--disable-userns``): one would give a process root's powers
over what it then mounts or unshares. The workspace quota is the workspace's own
file system where the host can mount one, else checked by the caller while
the call runs (``agents.workspace_quota``).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from agents.sandbox_cgroups import CPU, MEMORY, PROCESSES, CallGroup, CgroupError, NoGroup, Report, controls, sweep

log = logging.getLogger(__name__)
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
# Each run's uid when zenweb runs as root: base + run id mod count. The
# default range is above the ids Debian gives users and systemd gives
# containers; an operator whose host uses it picks another.
UID_BASE = 1_900_000_000
UID_COUNT = 65536
# The sandbox's own processes in a call (bubblewrap's two, a second
# bubblewrap's two as root, the watcher's two): a call's cgroup allows
# these on top of its ``processes``, which are the command's.
OWN_PROCESSES = 6
# The uid a sandboxed process sees itself as, whatever it is on the host:
# "nobody" has a name in /etc/passwd, which some programs look up.
SHOWN_UID = 65534


class SandboxUnavailable(RuntimeError):
    """No sandbox can start here; the message says why and how to enable one."""


@dataclass(frozen=True)
class ProcessLimits:
    """What one sandboxed call may use. ``processes``, ``cpu_seconds`` (CPU
    time, not wall time) and ``memory_mb`` count the whole call where a
    cgroup holds it, else each process (``memory_mb`` is then address
    space, ulimit -v); ``file_size_mb`` is the largest file it may write;
    ``disk_mb`` the workspace's size. 0 means no limit (a long-lived MCP
    server has no CPU-time cap)."""

    processes: int = 256
    cpu_seconds: int = 300
    memory_mb: int = 4096
    file_size_mb: int = 1024
    disk_mb: int = 2048
    network: bool = False

    def within(self, maxima: ProcessLimits) -> ProcessLimits:
        """These limits, none past the operator's ``maxima``."""
        return ProcessLimits(
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
    # The uid commands run as when zenweb runs as root (``for_run`` gives a run its own).
    uid: int = 65534
    # Each run's own uid as root: uid_base + run id mod uid_count (0: all share ``uid``).
    uid_base: int = UID_BASE
    uid_count: int = UID_COUNT
    # Where each call's cgroup goes (agents/sandbox_cgroups.py): "" a zenweb
    # group under the server's own, "off", or a cgroup path (ZENWEB_SANDBOX_CGROUP).
    cgroup: str = ""
    limits: ProcessLimits = field(default_factory=ProcessLimits)
    # The workspace quota enforced by a file system of its own where the host
    # allows it (agents/workspace_quota.py); False: checked only (ZENWEB_WORKSPACE_QUOTA=checked).
    workspace_fs: bool = True

    @property
    def enabled(self) -> bool:
        return self.mode == "on"

    def with_limits(self, limits: ProcessLimits) -> Sandbox:
        return replace(self, limits=limits)

    def for_run(self, run_id: int) -> Sandbox:
        """This sandbox for one run's calls: as root, under the run's own uid,
        so that no other run's processes count against its process limit
        or can signal its processes."""
        if self.uid_count <= 0:
            return self
        return replace(self, uid=self.uid_base + run_id % self.uid_count)

    def whole_call(self) -> Report:
        """Which limits this host holds for a whole call, and how (detected once)."""
        return controls(self.cgroup)

    def call_group(self, *, cpu: bool = True) -> CallGroup | NoGroup:
        """A new cgroup for one call with this sandbox's limits (``cpu``
        False: no CPU-seconds cap, for a long-lived MCP server), or no group
        where the host allows none. Pass it to ``command`` and ``with`` it:
        its processes are killed and it is removed when the block ends.
        Raises SandboxUnavailable if the host has cgroups but this one
        cannot be made: the call would otherwise run without its limits."""
        report = self.whole_call()
        if not report.dirs:
            return NoGroup()
        try:
            return CallGroup.create(
                report,
                memory_bytes=self.limits.memory_mb * MB,
                processes=self.limits.processes + OWN_PROCESSES if self.limits.processes > 0 else 0,
                cpu_seconds=self.limits.cpu_seconds if cpu else 0,
            )
        except CgroupError as exc:
            raise SandboxUnavailable(str(exc)) from None

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
        group: CallGroup | NoGroup | None = None,
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
        extra directories it may read (an MCP server's own files).
        ``group`` (``call_group``): the call's cgroup, which the command
        enters before anything starts; the rlimits it replaces are lifted."""
        group = group or NoGroup()
        limited = [*_prlimit(self.limits, group), "--", *argv]
        if not self.enabled:
            return group.wrap(limited)
        line = [*self._namespaces(env), *self._file_system(writable, readonly)]
        if cwd is not None:
            line += ["--chdir", str(cwd)]
        line += ["--", *self._as_run_user()]
        return group.wrap([*line, *limited])

    def _namespaces(self, env: Mapping[str, str]) -> list[str]:
        """bubblewrap with the namespaces the command gets, and the variables
        of this process's environment that are not in ``env`` unset."""
        line = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        if os.geteuid() != 0:
            # Its own user namespace, where no further one can be made.
            line += ["--unshare-user", "--disable-userns"]
        if not self.limits.network:
            line.append("--unshare-net")
        for name in sorted(set(os.environ) - set(env)):
            line += ["--unsetenv", name]
        return line

    def _file_system(self, writable: Path | None, readonly: Iterable[Path]) -> list[str]:
        """bubblewrap's mounts: the system read-only, a /tmp in memory,
        ``readonly`` and ``writable`` bound with the directories above them."""
        line: list[str] = []
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
        for flag, bound in binds:
            # Directories bubblewrap makes on the way are root's and 0700 otherwise.
            for parent in reversed(bound.parents):
                if str(parent) not in ("/", "/tmp"):
                    line += ["--perms", "0755", "--dir", str(parent)]
            line += [flag, str(bound), str(bound)]
        return line

    def _as_run_user(self) -> list[str]:
        """What runs the command as the run's uid inside the sandbox, when
        this process is root: nothing otherwise."""
        if os.geteuid() != 0:
            return []
        # Root would ignore the process-count limit and could undo the rest.
        line = [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
        if _userns_open():
            # Root's bubblewrap above cannot close them (a user namespace
            # it made would map the command to root): a second one, as
            # the run's uid, makes the user namespace no other can be made in.
            line += [self.bwrap, "--unshare-user", "--disable-userns"]
            line += ["--uid", str(SHOWN_UID), "--gid", str(SHOWN_UID), "--dev-bind", "/", "/", "--"]
        return line

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


def _prlimit(limits: ProcessLimits, group: CallGroup | NoGroup) -> list[str]:
    """The rlimits of each process. What the call's cgroup holds for the
    whole call is left as the server has it: memory (address space is not
    memory: a runtime reserves gigabytes it never uses) and processes (that
    count was the uid's, every call of it together). CPU time stays, a
    second past the whole call's: a backstop should the caller stall."""

    def value(number: int, unit: int = 1) -> int | str:
        return number * unit if number > 0 else "unlimited"

    cpu = limits.cpu_seconds + 1 if group.enforces(CPU) and limits.cpu_seconds > 0 else limits.cpu_seconds
    line = ["prlimit", f"--cpu={value(cpu)}", f"--fsize={value(limits.file_size_mb, MB)}"]
    if not group.enforces(PROCESSES):
        line.append(f"--nproc={value(limits.processes)}")
    if not group.enforces(MEMORY):
        line.append(f"--as={value(limits.memory_mb, MB)}")
    return line


_USERNS: list[bool] = []


def _userns_open() -> bool:
    """Whether an unprivileged uid may make a user namespace here (asked
    once): if the host forbids it, none can be made in the sandbox either."""
    if not _USERNS:
        line = ["setpriv", f"--reuid={SHOWN_UID}", f"--regid={SHOWN_UID}", "--clear-groups", "--no-new-privs"]
        try:
            done = subprocess.run([*line, "unshare", "--user", "true"], capture_output=True, timeout=10, check=False)
            _USERNS.append(done.returncode == 0)
        except (OSError, subprocess.TimeoutExpired):
            _USERNS.append(True)  # unknown: bubblewrap's probe tells
    return _USERNS[0]


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


def capabilities(sandbox: Sandbox) -> list[str]:
    """What the sandbox enforces on this host and how, a line each: the
    worker's start log, ``manage.py sandbox_report`` (docs/sandbox.md)."""
    if sandbox.enabled:
        problem = probe(sandbox.bwrap)
        lines = [f"sandbox: {'cannot start, ' + problem if problem else 'bubblewrap'}"]
    else:
        lines = ["sandbox: off (ZENWEB_SANDBOX=off): commands run as the server's user under the limits below"]
    lines.append(sandbox.whole_call().describe())
    if os.geteuid() != 0:
        lines.append("uids: commands run as the server's user, in a user namespace of each call's own")
        lines.append("user namespaces inside: closed (bubblewrap --disable-userns)")
        return lines
    if sandbox.uid_count > 0:
        last = sandbox.uid_base + sandbox.uid_count - 1
        lines.append(f"uids: each run its own, {sandbox.uid_base}..{last} (the run's id mod {sandbox.uid_count})")
    else:
        lines.append(f"uids: every run's commands run as {sandbox.uid}")
    closed = "closed (bubblewrap --disable-userns)" if _userns_open() else "closed by the host"
    lines.append(f"user namespaces inside: {closed}")
    return lines


def at_start(sandbox: Sandbox) -> list[str]:
    """Once, when a worker starts: remove the cgroups of calls whose
    process died mid-call, and log what the sandbox enforces (a warning
    where a whole call's memory, processes or CPU time go unlimited)."""
    removed = sweep(sandbox.whole_call())
    if removed:
        log.info("removed %d cgroup(s) of calls whose worker died", removed)
    lines = capabilities(sandbox)
    level = logging.INFO if sandbox.whole_call().complete else logging.WARNING
    log.log(level, "%s", "; ".join(lines))
    return lines


# runs/actions/tool_host.py imports ProcessLimits as Limits: this alias goes when it imports it by its name.
Limits = ProcessLimits
