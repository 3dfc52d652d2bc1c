"""The workspace disk quota, enforced by the file system where the host allows it.

Each run's workspace is its own ext4 file system: a sparse image file beside
the workspace directory (``run-7.img`` beside ``run-7``), as large as the
run's disk quota and with a capped number of inodes, loop-mounted on the
directory when a tool first needs the workspace (``ensure``), and again after
a restart of the host. The kernel then refuses every write past it, whatever
makes it: a plain write, ``fallocate``, a file unlinked while still open, a
file tool, another process. Only a root server with loop devices can mount
(``unavailable`` says why not); elsewhere, and where the operator asks for it
(``ZENWEB_WORKSPACE_QUOTA=checked``), the quota is checked instead: measured
while a command runs, what a call grew past it deleted when the call ends
(``Growth``), and each file tool's write checked before it is made (``room``).

Why this design: a loop-mounted image needs nothing of the host's file system
(project quotas need a file system mounted with them; /dev/vda here has none),
keeps the workspace's files across restarts (tmpfs would lose them and spend
memory), and costs about 15 ms to make and mount: the image is sparse, so it
takes on the host only what is written in it. Images live outside the
workspace (the sandbox mounts only the workspace), and ``remove`` unmounts
one before deleting it with its directory (retention).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MB = 1024 * 1024
# One inode (file, folder, symlink) per 16 KiB of quota, ext4's own default
# ratio, but never fewer than this: 200,000 empty files cannot fit 8 MB.
BYTES_PER_FILE = 16 * 1024
MIN_FILES = 256
# No set-uid programs or device files from a workspace; freed blocks are
# returned to the host (the image stays sparse); the inode tables are not
# zeroed in the background (the image stays small and quiet).
MOUNT_OPTIONS = "loop,nosuid,nodev,discard,noinit_itable"
MKFS_OPTIONS = ("-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1")


class QuotaError(RuntimeError):
    """A workspace's file system cannot be made or mounted; the message says why."""


@dataclass(frozen=True)
class Quota:
    """A workspace's quota: ``disk_mb`` (0: none) and whether the file
    system may enforce it (``filesystem``), or only checks may."""

    disk_mb: int
    filesystem: bool = True

    @property
    def limit(self) -> int:
        return self.disk_mb * MB

    @property
    def files(self) -> int:
        return files_for(self.disk_mb)

    def full(self) -> str:
        return f"the workspace quota of {self.disk_mb} MB is full"

    def no_inodes(self) -> str:
        return (
            f"the workspace's limit of {self.files} files and folders is reached "
            f"(its disk quota of {self.disk_mb} MB allows one per {BYTES_PER_FILE // 1024} KiB)"
        )


def files_for(disk_mb: int) -> int:
    """How many files and folders a workspace of ``disk_mb`` may hold."""
    return max(MIN_FILES, disk_mb * MB // BYTES_PER_FILE)


def image_of(root: Path) -> Path:
    return root.with_name(root.name + ".img")


_CAPABILITY: list[str] = []


def unavailable() -> str:
    """Why this host cannot give a workspace its own file system, or "".
    Asked once per process, by making and mounting a 1 MB one."""
    if not _CAPABILITY:
        _CAPABILITY.append(_probe())
    return _CAPABILITY[0]


def checked_only(filesystem: bool) -> str:
    """Why workspace quotas are only checked here, not enforced by a file
    system (``filesystem``: the operator allows one), or "" if they are."""
    return "ZENWEB_WORKSPACE_QUOTA=checked" if not filesystem else unavailable()


def _probe() -> str:
    if os.geteuid() != 0:
        return "zenweb does not run as root, and only root can mount a workspace's file system"
    if not os.path.exists("/dev/loop-control"):
        return "the host has no loop devices (/dev/loop-control is missing)"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    with tempfile.TemporaryDirectory(prefix="zenweb-quota-probe-") as folder:
        root = Path(folder) / "workspace"
        root.mkdir()
        try:
            _make(image_of(root), 1)
            _mount(image_of(root), root)
        except QuotaError as exc:
            return str(exc)
        finally:
            _unmount(root)
    return ""


def ensure(root: Path, quota: Quota | None) -> bool:
    """Mount ``root``'s file system if it has one; make it first if it has
    none, ``quota`` asks for one and the host can, and ``root`` is still
    empty (a workspace written before has its files kept, under checks).
    True when the file system enforces the quota. Two processes (workers)
    or threads asking at once take turns (a lock on the workspaces' folder)."""
    if os.path.ismount(root):
        return True
    image = image_of(root)
    wanted = quota is not None and quota.filesystem and quota.disk_mb > 0
    if not image.exists() and not wanted:
        return False
    with _locked(root.parent):
        if os.path.ismount(root):
            return True
        if image.exists():
            _mount(image, root)
            return True
        assert quota is not None
        with os.scandir(root) as entries:
            if unavailable() or any(entries):
                return False
        try:
            _make(image, quota.disk_mb)
            _mount(image, root)
        except QuotaError:
            image.unlink(missing_ok=True)
            raise
        # Made by mkfs, root's and in the way: fsck makes it again if it must.
        os.rmdir(root / "lost+found")
        os.chmod(root, 0o700)
        return True


def mounted_in(folder: Path) -> list[Path]:
    """The workspaces directly under ``folder`` whose file systems this
    host has mounted (read from /proc/self/mountinfo: no call per folder)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    parent = str(folder.resolve())
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        # The mount point, a space or other such byte written as an octal escape (\040).
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
        if str(point.parent) == parent:
            found.append(point)
    return found


def release(root: Path) -> bool:
    """Unmount ``root``'s file system, keeping its image (``ensure`` mounts
    it again when a tool next needs it): False while a process still holds
    it. Never lazily: a lazy unmount would leave a holder writing past the
    quota into the bare directory underneath."""
    if not os.path.ismount(root):
        return True
    with _locked(root.parent):
        if not os.path.ismount(root):
            return True
        done = subprocess.run(["umount", str(root)], capture_output=True, check=False)
        return done.returncode == 0


def remove(root: Path) -> None:
    """Delete a workspace: unmount its file system (lazily if a process
    still holds it), delete its image, then the directory."""
    if root.parent.is_dir():
        with _locked(root.parent):
            _unmount(root)
            image_of(root).unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    # flock is per open file: each caller's own open takes its turn, threads included.
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise QuotaError(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip()[:300]
        raise QuotaError(f"{what} failed (exit {done.returncode}: {why or 'no message'})")


def _make(image: Path, disk_mb: int) -> None:
    # Made under another name and renamed when whole: a crash halfway leaves
    # no image that would fail to mount every time after.
    partial = image.with_name(image.name + ".partial")
    partial.unlink(missing_ok=True)
    # Sparse: the host spends only what the file system writes in it.
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.ftruncate(fd, disk_mb * MB)
    finally:
        os.close(fd)
    try:
        mkfs = ["mkfs.ext4", *MKFS_OPTIONS, "-N", str(files_for(disk_mb)), str(partial)]
        _run(mkfs, "making the workspace's file system")
    except QuotaError:
        partial.unlink(missing_ok=True)
        raise
    os.rename(partial, image)


def _mount(image: Path, root: Path) -> None:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    _run(["mount", "-t", "ext4", "-o", MOUNT_OPTIONS, str(image), str(root)], "mounting the workspace's file system")


def _unmount(root: Path) -> None:
    """Unmount ``root`` if it is mounted; the loop device goes with it
    (mount -o loop sets it to detach itself)."""
    if not os.path.ismount(root):
        return
    done = subprocess.run(["umount", str(root)], capture_output=True, check=False)
    if done.returncode != 0:
        subprocess.run(["umount", "--lazy", str(root)], capture_output=True, check=False)


# -- checks: where no file system enforces the quota, and before a file tool writes


def is_full(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def why_full(root: Path, quota: Quota) -> str:
    """After a write failed for space: which of the quota's two limits it met."""
    try:
        info = os.statvfs(root)
    except OSError:
        return quota.full()
    return quota.no_inodes() if os.path.ismount(root) and info.f_favail == 0 else quota.full()


def full_now(root: Path, quota: Quota) -> str:
    """Whether the workspace's own file system is (nearly) full, as the model
    is told after a command: its writes failed with "No space left on device"."""
    if quota.disk_mb <= 0 or not os.path.ismount(root):
        return ""
    info = os.statvfs(root)
    if info.f_favail == 0:
        return quota.no_inodes()
    return quota.full() if info.f_bavail < 16 else ""


def room(root: Path, quota: Quota, *, adding: int, replacing: int, new_file: bool) -> str:
    """Why writing ``adding`` bytes in place of ``replacing`` (one more file
    if ``new_file``) would pass ``quota``, or "". Asked before a file tool
    writes, so that a refused write leaves the old file as it was."""
    if quota.disk_mb <= 0:
        return ""
    if os.path.ismount(root):
        info = os.statvfs(root)
        free, files = info.f_bavail * info.f_frsize, info.f_favail
        # A block of slack: a file's last block, a folder's growth.
        needed = adding - replacing + info.f_frsize
        if new_file and files < 1:
            return quota.no_inodes()
        return quota.full() if needed > free else ""
    used, count = usage(root)
    if new_file and count + 1 > quota.files:
        return quota.no_inodes()
    return quota.full() if used - replacing + adding > quota.limit else ""


def usage(root: Path) -> tuple[int, int]:
    """The disk space the files under ``root`` take (links not followed), and how many there are."""
    total = count = 0
    for entry in _walk(root):
        total += entry.blocks
        count += 1
    return total, count


@dataclass(frozen=True)
class _Entry:
    path: tuple[str, ...]
    inode: int
    blocks: int
    mtime: float
    folder: bool


def _walk(root: Path) -> Iterator[_Entry]:
    """Everything under ``root``: os.fwalk opens each folder from the one
    above it and follows no symlink."""
    for parent, dirs, files, fd in os.fwalk(root):
        where = Path(parent).relative_to(root).parts
        for name in [*dirs, *files]:
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            yield _Entry((*where, name), info.st_ino, info.st_blocks * 512, info.st_mtime, stat.S_ISDIR(info.st_mode))


class Growth:
    """What one call adds to a checked workspace: measured while it runs
    (``exceeded``), and past the quota when it ends, deleted (``trim``):
    the files and folders the call created or grew, newest first, until the
    workspace is within its quota again. What was there before the call is
    never touched, so a call that only deletes still runs."""

    def __init__(self, root: Path, quota: Quota) -> None:
        self.root = root
        self.quota = quota
        self.before = {entry.path: (entry.inode, entry.blocks) for entry in _walk(root)} if quota.disk_mb else {}
        self.start = (sum(blocks for _, blocks in self.before.values()), len(self.before))

    def _over(self, used: int, count: int) -> bool:
        grew = used > self.start[0] or count > self.start[1]
        return grew and (used > self.quota.limit or count > self.quota.files)

    def exceeded(self) -> bool:
        return self.quota.disk_mb > 0 and self._over(*usage(self.root))

    def trim(self) -> list[str]:
        """Delete what the call added past the quota; the paths deleted."""
        if self.quota.disk_mb <= 0:
            return []
        entries = list(_walk(self.root))
        used, count = sum(e.blocks for e in entries), len(entries)
        if not self._over(used, count):
            return []
        deleted: list[str] = []
        # Newest first; what is in a folder before the folder (deeper paths first among equals).
        for entry in sorted(filter(self._added, entries), key=lambda e: (e.mtime, len(e.path)), reverse=True):
            if used <= self.quota.limit and count <= self.quota.files:
                break
            freed = _delete_beneath(self.root, entry.path)
            if freed is not None:
                used -= freed[0]
                count -= freed[1]
                deleted.append("/".join(entry.path))
        return deleted

    def _added(self, entry: _Entry) -> bool:
        """Created by the call, or a file it grew (a folder that was there stays)."""
        was = self.before.get(entry.path)
        if was is None or was[0] != entry.inode:
            return True
        return not entry.folder and entry.blocks > was[1]


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _delete_beneath(root: Path, path: tuple[str, ...]) -> tuple[int, int] | None:
    """Delete ``path`` under ``root`` (a folder with what is in it), reached
    one folder at a time without following a symlink (a folder swapped for
    one leads nowhere): the bytes and entries it freed, or None if it could
    not be deleted."""
    try:
        fd = os.open(root, _FOLDER)
    except OSError:
        return None
    try:
        for part in path[:-1]:
            inner = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
        return _delete(fd, path[-1])
    except OSError:
        return None
    finally:
        os.close(fd)


def _delete(parent: int, name: str) -> tuple[int, int]:
    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    freed, count = (info.st_blocks * 512 if info.st_nlink == 1 or stat.S_ISDIR(info.st_mode) else 0), 1
    if stat.S_ISDIR(info.st_mode):
        fd = os.open(name, _FOLDER, dir_fd=parent)
        try:
            for child in os.listdir(fd):
                more = _delete(fd, child)
                freed, count = freed + more[0], count + more[1]
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)
    return freed, count
