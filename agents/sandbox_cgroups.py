"""Limits for the whole of a sandboxed call: each call in a cgroup of its own.

An rlimit holds per process: 8 processes of 180 MB pass a 256 MB
address-space cap, and 6 busy children each get the whole CPU-seconds cap.
A cgroup counts the call: every process the call starts is in it before it
can fork (``CallGroup.wrap`` writes its own pid into the group, then execs
the sandbox), the kernel refuses memory past ``memory.max`` (v1:
``memory.limit_in_bytes``, with swap: ``memsw``) and processes past
``pids.max``, and accounts the CPU time of all of them (``cpu.stat``, v1
``cpuacct.usage``), which the caller watches (``exceeded``) to kill the
whole call at its CPU-seconds or after the kernel's OOM killer struck one
of its processes.

Groups live under a parent zenweb owns: by default ``zenweb`` under the
cgroup the server itself runs in (a container's or a service's own limits
still hold above it), ``ZENWEB_SANDBOX_CGROUP`` names another one (cgroup
v2 needs that where the server's own cgroup holds processes: a delegated
one, systemd's ``Delegate=yes``). Each call's group is named after the
process that made it, so a later start can remove those of a process that
died (``sweep``). Where none of this is writable (a server not root and
given no delegated cgroup), ``detect`` says why and the caller keeps the
rlimits alone. No Django here.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import logging
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

log = logging.getLogger("agents.sandbox")

# The three controls, by what a limit is called (ProcessLimits' names).
MEMORY, PROCESSES, CPU = "memory", "processes", "cpu"
CONTROLS = (MEMORY, PROCESSES, CPU)
# cgroup v1 keeps each controller in a hierarchy of its own.
V1_CONTROLLER = {MEMORY: "memory", PROCESSES: "pids", CPU: "cpuacct"}
V2_CONTROLLER = {MEMORY: "memory", PROCESSES: "pids", CPU: "cpu"}
PARENT_NAME = "zenweb"
# A call's group: call-<pid>-<its start time>-<its pid namespace>-<n>.
_NAME = re.compile(r"(?:call|probe)-(\d+)-(\d+)-(\d+)-\d+")
# How long a group's processes may take to be gone after SIGKILL before
# its directory is left to the next start's sweep.
REMOVE_SECONDS = 5.0
# Enters each cgroup.procs file given (its count first), then runs the
# rest: the sandbox starts inside the group, before anything can fork.
_ENTER = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"'


class CgroupError(RuntimeError):
    """A call's cgroup could not be made or entered; the message says why."""


@dataclass(frozen=True)
class Report:
    """What this host enforces for a whole call: the cgroup version (0: none),
    the directory each control's groups go in, and why a control is missing."""

    version: int = 0
    dirs: dict[str, Path] = field(default_factory=dict)
    problem: str = ""

    def enforces(self, control: str) -> bool:
        return control in self.dirs

    @property
    def complete(self) -> bool:
        return all(self.enforces(c) for c in CONTROLS)

    def describe(self) -> str:
        """One line for a log, a page and ``manage.py sandbox_report``."""
        if not self.dirs:
            return (
                f"whole-call limits: none ({self.problem}); memory, processes and CPU time are "
                "limited per process only (rlimits)"
            )
        how = {
            MEMORY: "memory.max" if self.version == 2 else "memory.limit_in_bytes",
            PROCESSES: "pids.max",
            CPU: "cpu.stat" if self.version == 2 else "cpuacct.usage",
        }
        done = ", ".join(f"{c} ({how[c]} in {self.dirs[c]})" for c in CONTROLS if self.enforces(c))
        line = f"whole-call limits: cgroup v{self.version}: {done}"
        missing = [c for c in CONTROLS if not self.enforces(c)]
        if missing:
            line += f"; per process only: {', '.join(missing)} ({self.problem})"
        return line

    @property
    def parent(self) -> Path | None:
        return next(iter(self.dirs.values()), None)


@dataclass(frozen=True)
class _Mount:
    version: int
    point: Path
    root: str  # the cgroup path mounted there (a container sees its own as /)
    controllers: frozenset[str]


def _mounts(mountinfo: str) -> list[_Mount]:
    found = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3 or rest[0] not in ("cgroup", "cgroup2"):
            continue
        point = Path(fields[4].replace("\\040", " "))
        if rest[0] == "cgroup2":
            listed = point / "cgroup.controllers"
            controllers = frozenset(listed.read_text().split()) if listed.exists() else frozenset()
            found.append(_Mount(2, point, fields[3], controllers))
        else:
            found.append(_Mount(1, point, fields[3], frozenset(rest[2].split(","))))
    return found


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """This process's cgroup per v1 controller, and under "" its v2 one."""
    own = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                own[name] = parts[2]
    return own


def _under(mount: _Mount, cgroup: str) -> Path:
    """The directory of ``cgroup`` (a path as /proc/self/cgroup writes it) in ``mount``."""
    path, root = PurePosixPath(cgroup), PurePosixPath(mount.root)
    return mount.point / (path.relative_to(root) if path.is_relative_to(root) else path.relative_to("/"))


def detect(
    setting: str = "", *, mountinfo: Path = Path("/proc/self/mountinfo"), proc_cgroup: Path = Path("/proc/self/cgroup")
) -> Report:
    """What this host lets zenweb enforce per call. ``setting``: "" (a
    ``zenweb`` group under the server's own), "off", or the cgroup path of
    the parent to use. Makes the parent; never raises."""
    if setting.strip().lower() == "off":
        return Report(problem="ZENWEB_SANDBOX_CGROUP=off")
    try:
        mounts = _mounts(mountinfo.read_text())
        own = _own_paths(proc_cgroup.read_text())
    except OSError as exc:
        return Report(problem=f"cannot read this process's cgroups: {exc}")
    unified = next((m for m in mounts if m.version == 2 and {"memory", "pids"} <= m.controllers), None)
    if unified is not None:
        return _detect_v2(unified, setting or f"{own.get('', '/').rstrip('/')}/{PARENT_NAME}")
    return _detect_v1(mounts, own, setting)


def _detect_v2(mount: _Mount, parent_path: str) -> Report:
    parent = _under(mount, parent_path)
    wanted = [V2_CONTROLLER[c] for c in (MEMORY, PROCESSES) if V2_CONTROLLER[c] in mount.controllers]
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # Each group from the mount down to the parent must hand the
        # controllers down; the kernel refuses that (EBUSY) below a group
        # that holds processes, as the server's own does.
        for group in [*(g for g in reversed(parent.parents) if g.is_relative_to(mount.point)), parent]:
            _enable(group, wanted)
        enabled = _subtree_control(parent)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EBUSY:
            why = "a group above it holds processes (the server's own): give zenweb a delegated one"
        return Report(problem=f"cgroup v2: cannot use {parent} ({why}); set ZENWEB_SANDBOX_CGROUP")
    dirs = {c: parent for c in (MEMORY, PROCESSES) if V2_CONTROLLER[c] in enabled}
    # cpu.stat's usage_usec is kept in every group, with the cpu controller or without it.
    dirs[CPU] = parent
    return _probed(Report(2, dirs, _missing(dirs, "not enabled in cgroup v2")))


def _subtree_control(group: Path) -> set[str]:
    """The controllers ``group`` hands down (the kernel lists them bare,
    "memory pids"; what was written to it reads "+memory +pids")."""
    return {name.lstrip("+") for name in (group / "cgroup.subtree_control").read_text().split()}


def _enable(group: Path, controllers: list[str]) -> None:
    have = _subtree_control(group)
    if set(controllers) - have:
        (group / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in controllers if c not in have))


def _detect_v1(mounts: list[_Mount], own: dict[str, str], setting: str) -> Report:
    dirs: dict[str, Path] = {}
    problems = []
    for control in CONTROLS:
        name = V1_CONTROLLER[control]
        mount = next((m for m in mounts if m.version == 1 and name in m.controllers), None)
        if mount is None:
            problems.append(f"no cgroup v1 {name} controller mounted")
            continue
        parent = _under(mount, setting or f"{own.get(name, '/').rstrip('/')}/{PARENT_NAME}")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problems.append(f"cannot make {parent}: {exc.strerror or exc}")
            continue
        dirs[control] = parent
    if not dirs and not problems:
        problems.append("no cgroup controller mounted")
    return _probed(Report(1 if dirs else 0, dirs, "; ".join(problems)))


def _missing(dirs: dict[str, Path], why: str) -> str:
    missing = [c for c in CONTROLS if c not in dirs]
    return f"{', '.join(missing)}: {why}" if missing else ""


def _probed(report: Report) -> Report:
    """``report`` if a process can enter a group made under it, else none."""
    if not report.dirs:
        return report
    try:
        with CallGroup.create(report, memory_bytes=64 * 1024 * 1024, processes=8, prefix="probe") as group:
            done = subprocess.run(group.wrap(["true"]), capture_output=True, timeout=10, check=False)
            if done.returncode != 0:
                raise CgroupError(done.stderr.decode(errors="replace").strip()[:200] or f"exit {done.returncode}")
    except (OSError, CgroupError, subprocess.TimeoutExpired) as exc:
        return Report(problem=f"cgroups under {report.parent} cannot be used: {exc}")
    return report


@functools.cache
def controls(setting: str = "") -> Report:
    """``detect``, once per process and setting."""
    return detect(setting)


_COUNTER = itertools.count(1)


def _start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone:
    a pid alone may have been given to another process since."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _pid_namespace() -> int:
    """This process's pid namespace (0 if unknown): only the groups of
    processes in it can be known dead by their pid."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


class CallGroup:
    """One call's cgroup (a directory per hierarchy in v1), made by
    ``create``; ``with`` it, it is killed and removed when the block ends."""

    def __init__(self, report: Report, name: str, cpu_ns: int) -> None:
        self.version = report.version
        self.dirs = {c: d / name for c, d in report.dirs.items()}
        self.cpu_ns = cpu_ns

    @classmethod
    def create(
        cls, report: Report, *, memory_bytes: int = 0, processes: int = 0, cpu_seconds: int = 0, prefix: str = "call"
    ) -> CallGroup:
        """A new group with these limits (0: none) under ``report``'s
        parents. Raises CgroupError (having removed what it made)."""
        pid = os.getpid()
        name = f"{prefix}-{pid}-{_start_time(pid) or 0}-{_pid_namespace()}-{next(_COUNTER)}"
        group = cls(report, name, cpu_seconds * 1_000_000_000)
        try:
            group._make(memory_bytes, processes)
        except OSError as exc:
            group.remove()
            raise CgroupError(f"cannot make the call's cgroup: {exc.strerror or exc} ({exc.filename})") from None
        return group

    def __enter__(self) -> CallGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.remove()

    def _make(self, memory_bytes: int, processes: int) -> None:
        for path in set(self.dirs.values()):
            # A parent another process removed while empty comes back (v1 keeps no settings in it).
            path.mkdir(parents=self.version == 1)
        if MEMORY in self.dirs and memory_bytes > 0:
            if self.version == 2:
                self._write(MEMORY, "memory.max", memory_bytes)
                self._write(MEMORY, "memory.swap.max", 0, optional=True)
                # The OOM killer takes the whole call, not one process of it.
                self._write(MEMORY, "memory.oom.group", 1, optional=True)
            else:
                self._write(MEMORY, "memory.limit_in_bytes", memory_bytes)
                # Memory and swap together: the call cannot swap its way past it.
                self._write(MEMORY, "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
        if PROCESSES in self.dirs and processes > 0:
            self._write(PROCESSES, "pids.max", processes)

    def _write(self, control: str, name: str, value: int, *, optional: bool = False) -> None:
        path = self.dirs[control] / name
        if optional and not path.exists():
            return
        path.write_text(str(value))

    def enforces(self, control: str) -> bool:
        return control in self.dirs

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside this group (needs ``sh``)."""
        procs = [str(path / "cgroup.procs") for path in sorted(set(self.dirs.values()))]
        return ["sh", "-c", _ENTER, "enter", str(len(procs)), *procs, *argv]

    def cpu_seconds(self) -> float:
        """The CPU time the call's processes have used, all of them, ended ones included."""
        if CPU not in self.dirs:
            return 0.0
        try:
            if self.version == 2:
                stat = dict(line.split() for line in (self.dirs[CPU] / "cpu.stat").read_text().splitlines())
                return int(stat.get("usage_usec", 0)) / 1e6
            return int((self.dirs[CPU] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return 0.0

    def oom_kills(self) -> int:
        """How many of the call's processes the OOM killer took."""
        if MEMORY not in self.dirs:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.dirs[MEMORY] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def exceeded(self) -> str:
        """What stops the call now: ``MEMORY`` if the kernel killed a process
        of it for memory, ``CPU`` if it used its CPU seconds, else ""."""
        if self.oom_kills():
            return MEMORY
        if self.cpu_ns and self.cpu_seconds() * 1e9 >= self.cpu_ns:
            return CPU
        return ""

    def pids(self) -> set[int]:
        """The call's processes, in any of its groups."""
        found: set[int] = set()
        for path in set(self.dirs.values()):
            with contextlib.suppress(OSError, ValueError):
                found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """SIGKILL every process of the call (v1 has no cgroup.kill: again
        until none is left, as one may fork meanwhile)."""
        for path in set(self.dirs.values()):
            with contextlib.suppress(OSError):
                if (path / "cgroup.kill").exists():
                    (path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + REMOVE_SECONDS
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def remove(self) -> None:
        """Kill what is left and remove the group's directories; one that
        stays busy is left to the next start's sweep, and logged."""
        self.kill()
        for path in set(self.dirs.values()):
            _rmdir(path)


class NoGroup:
    """No cgroup (the host allows none): the call runs under its rlimits alone."""

    def __enter__(self) -> NoGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def enforces(self, control: str) -> bool:
        return False

    def wrap(self, argv: list[str]) -> list[str]:
        return argv

    def cpu_seconds(self) -> float:
        return 0.0

    def exceeded(self) -> str:
        return ""


def _rmdir(path: Path) -> None:
    deadline = time.monotonic() + REMOVE_SECONDS
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            # Busy until the last process of the group is reaped.
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                log.warning("could not remove the cgroup %s: %s", path, exc.strerror or exc)
                return
            time.sleep(0.02)


def sweep(report: Report) -> int:
    """Remove the groups of calls whose process is gone (it died mid-call):
    kill what is left in each, then remove it. How many directories were
    removed (one per hierarchy in v1)."""
    removed = 0
    for parent in set(report.dirs.values()):
        try:
            names = [entry.name for entry in parent.iterdir() if entry.is_dir()]
        except OSError:
            continue
        for name in names:
            match = _NAME.fullmatch(name)
            if match is None or int(match[3]) != _pid_namespace() or _start_time(int(match[1])) == int(match[2]):
                # Not a call's; a process of another pid namespace (a pid
                # here means nothing there); or its process lives.
                continue
            stale = CallGroup(Report(report.version, {c: d for c, d in report.dirs.items() if d == parent}), name, 0)
            stale.remove()
            removed += not (parent / name).exists()
    return removed
