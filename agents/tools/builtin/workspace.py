"""Paths inside a run's workspace, and files opened there without leaving it.

Every path is relative to the workspace, and a path that leaves it
(absolute, ``..``, or a symlink resolving outside) is refused. A file is
then opened one folder at a time from the workspace down, following no
symlink (``open_beneath``): a command running at the same time (a turn's
tool calls run in parallel) that swaps a folder for a symlink after the
check makes the open fail instead of leave the workspace. Hard-linked or
special files (a FIFO, a device) are refused: a hard link made by a shell
command can name a file outside the workspace (another run's, the server's
secret key).

The workspace is its own file system where the host can mount one
(``agents.workspace_quota``): ``workspace_root`` mounts it before any tool
uses it, and a write past its quota is refused saying so.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from agents import workspace_quota
from agents.sandbox import Sandbox
from agents.tools.base import ToolContext, ToolError
from agents.workspace_quota import Quota


def quota_of(ctx: ToolContext) -> Quota:
    """The disk quota of the workspace ``ctx``'s tools work in."""
    sandbox = ctx.sandbox or Sandbox()
    return Quota(sandbox.limits.disk_mb, sandbox.workspace_fs)


def workspace_root(workspace: str, quota: Quota | None = None) -> Path:
    """The workspace directory, created if missing (0700: other users on the
    machine have no business in a run's files), fully resolved, with its
    file system mounted: made first when ``quota`` is given (a tool that
    writes) and the host can (``agents.workspace_quota.ensure``)."""
    root = Path(workspace)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = root.resolve()
    try:
        workspace_quota.ensure(root, quota)
    except workspace_quota.QuotaError as exc:
        raise ToolError(f"the workspace cannot be used: {exc}", kind="unavailable", action="finish") from None
    return root


def quota_refusal(why: str) -> ToolError:
    return ToolError(
        f"refused: {why}; nothing was written. Delete files the run no longer needs, then try again.",
        kind="domain_rejection",
        action="replan",
    )


def refuse(path: str, why: str, field: str = "path") -> ToolError:
    return ToolError(f"path {path!r} {why}", kind="invalid_call", action="correct_call", fields=[field])


def relative(path: str, field: str = "path") -> PurePosixPath:
    """``path`` as the model gave it, refused if absolute or climbing out."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        raise refuse(path, "is absolute; give a path relative to the workspace", field)
    if ".." in pure.parts:
        raise refuse(path, "leaves the workspace ('..' is not allowed)", field)
    return pure


def resolve(root: Path, path: str) -> Path:
    """Where ``path`` leads in the workspace ``root``, symlinks followed:
    refused if that is outside. What is opened there is open_beneath's."""
    target = (root / relative(path)).resolve()
    if not target.is_relative_to(root):
        raise refuse(path, "resolves outside the workspace (through a symlink)")
    return target


def shown_as(root: Path, target: Path) -> str:
    """``target`` as the model is shown it: relative to the workspace."""
    return target.relative_to(root).as_posix()


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_beneath(root: Path, target: Path, shown: str, flags: int, *, make_folders: bool = False) -> int:
    """A descriptor of ``target`` (resolved, inside ``root``), a plain file
    with one link: each folder on its way opened from the one before it,
    none through a symlink, then the file without following one (and
    without blocking on a FIFO). ``make_folders``: create missing folders."""
    parts = target.relative_to(root).parts
    if not parts:
        raise refuse(shown, "is a directory")
    folder = os.open(root, _FOLDER)
    try:
        for part in parts[:-1]:
            if make_folders:
                try:
                    os.mkdir(part, dir_fd=folder)
                except FileExistsError:
                    pass
            inner = _open_folder(folder, part, shown)
            os.close(folder)
            folder = inner
        return _open_file(folder, parts[-1], shown, flags)
    finally:
        os.close(folder)


def _open_folder(folder: int, name: str, shown: str) -> int:
    try:
        return os.open(name, _FOLDER, dir_fd=folder)
    except FileNotFoundError:
        raise refuse(shown, "does not exist") from None
    except OSError as exc:
        try:
            symlink = stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            symlink = False
        if symlink:  # where the check found a folder a moment before
            raise refuse(shown, f"changed while it was opened ({name!r} is a symlink now); call again") from None
        why = "is not a folder" if isinstance(exc, NotADirectoryError) else f"cannot be opened ({exc.strerror})"
        raise refuse(shown, f"cannot be reached: {name!r} on its way {why}") from None


def _open_file(folder: int, name: str, shown: str, flags: int) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=folder)
    except FileNotFoundError:
        raise refuse(shown, "does not exist") from None
    except IsADirectoryError:
        raise refuse(shown, "is a directory") from None
    except OSError as exc:
        if workspace_quota.is_full(exc):
            raise  # no inode left for a new file: write_text says so
        raise refuse(shown, f"cannot be opened ({exc.strerror}); only plain files can") from None
    info = os.fstat(fd)
    why = ""
    if stat.S_ISDIR(info.st_mode):
        why = "is a directory"
    elif not stat.S_ISREG(info.st_mode):
        why = "is a special file (a FIFO, socket or device); only plain files can be used"
    elif info.st_nlink > 1:
        why = f"is hard-linked ({info.st_nlink} names); hard-linked files are refused"
    if why:
        os.close(fd)
        raise refuse(shown, why)
    return fd


def read_bytes(root: Path, target: Path, shown: str, cap: int) -> bytes:
    fd = open_beneath(root, target, shown, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > cap:
            raise ToolError(f"{shown} is larger than {cap} bytes; use grep to find what you need", fields=["path"])
        return handle.read(cap + 1)


def write_text(root: Path, target: Path, shown: str, text: str, quota: Quota | None = None) -> None:
    """Write ``text`` as the whole of ``target``; past ``quota`` refused
    before anything of the old file changes (or, if space ran out meanwhile,
    after, saying so)."""
    data = text.encode("utf-8")
    if quota is not None:
        try:
            old, new_file = os.lstat(target).st_size, False
        except FileNotFoundError:
            old, new_file = 0, True
        why = workspace_quota.room(root, quota, adding=len(data), replacing=old, new_file=new_file)
        if why:
            raise quota_refusal(why)
    try:
        # No O_TRUNC: a hard-linked file must be refused before anything of it changes.
        fd = open_beneath(root, target, shown, os.O_WRONLY | os.O_CREAT, make_folders=True)
        with os.fdopen(fd, "wb") as handle:
            handle.truncate(0)
            handle.write(data)
    except OSError as exc:
        if quota is None or not workspace_quota.is_full(exc):
            raise
        raise ToolError(
            f"{workspace_quota.why_full(root, quota)}: {shown} could not be written in full. "
            "Delete files the run no longer needs, then write it again.",
            kind="domain_rejection",
            action="replan",
        ) from None


def read_text(root: Path, target: Path, shown: str, cap: int) -> str:
    data = read_bytes(root, target, shown, cap)
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file", kind="invalid_call", action="correct_call", fields=["path"])
    return data.decode("utf-8", errors="replace")
