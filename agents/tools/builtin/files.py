"""The files toolset: read, write, edit, glob and grep inside the run's workspace.

The workspace reaches each tool as the injected ``workspace`` argument; the
model never sees it. Every path is relative to it, and a path that leaves it
(absolute, ``..``, or a symlink resolving outside) is refused. A file is
then opened one folder at a time from the workspace down, following no
symlink (``_open_beneath``): a command running at the same time (the turn's
tool calls run in parallel) that swaps a folder for a symlink after the
check makes the open fail instead of leave the workspace. Hard-linked or
special files (a FIFO, a device) are refused: a hard link made by a shell
command can name a file outside the workspace (another run's, the server's
secret key).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.base import Role, Tool, ToolContext, ToolError
from agents.tools.results import MAX_RESULT_CHARS, Bounds, ToolResult

MAX_WRITE_CHARS = 256_000
# A page of read_file must fit the model's result cap, or the registry would
# replace it with a preview; leave room for the JSON around the lines.
MAX_READ_CHARS = MAX_RESULT_CHARS - 2_000
MAX_READ_FILE_BYTES = 10 * 1024 * 1024
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_LINE_CHARS = 300
# Past this many matches glob and grep stop counting and ask for a narrower pattern.
MAX_SCAN = 10_000

READERS: frozenset[Role] = frozenset({"coordinator", "step"})
WRITERS: frozenset[Role] = frozenset({"step"})


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str = Field(description="The run's workspace directory (injected).")


class ReadFileArgs(_Args):
    path: str = Field(min_length=1, description="File path relative to the workspace.")
    offset: int = Field(default=0, ge=0, description="Number of lines to skip (0 reads from the first line).")
    limit: int = Field(default=200, ge=1, le=2_000, description="Most lines to return.")


class WriteFileArgs(_Args):
    path: str = Field(min_length=1, description="File path relative to the workspace; parent folders are created.")
    content: str = Field(max_length=MAX_WRITE_CHARS, description="The whole new content of the file.")


class EditFileArgs(_Args):
    path: str = Field(min_length=1, description="File path relative to the workspace.")
    old: str = Field(
        min_length=1,
        max_length=MAX_WRITE_CHARS,
        description="Exact text to replace; it must occur exactly once in the file.",
    )
    new: str = Field(max_length=MAX_WRITE_CHARS, description="Text to put in its place.")


class GlobArgs(_Args):
    pattern: str = Field(min_length=1, description="Glob relative to the workspace, e.g. 'src/**/*.py'.")
    limit: int = Field(default=100, ge=1, le=500, description="Most paths to return.")
    cursor: str | None = Field(default=None, description="next_cursor from a previous call, for the next page.")


class GrepArgs(_Args):
    pattern: str = Field(min_length=1, description="Python regular expression searched line by line.")
    path: str = Field(default="**/*", min_length=1, description="Glob of the files to search, e.g. '**/*.md'.")
    ignore_case: bool = Field(default=False, description="Match regardless of case.")
    limit: int = Field(default=50, ge=1, le=500, description="Most matching lines to return.")
    cursor: str | None = Field(default=None, description="next_cursor from a previous call, for the next page.")


def workspace_root(workspace: str) -> Path:
    """The workspace directory, created if missing (0700: other users on the
    machine have no business in a run's files), fully resolved."""
    root = Path(workspace)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return root.resolve()


def _refuse(path: str, why: str, field: str = "path") -> ToolError:
    return ToolError(f"path {path!r} {why}", kind="invalid_call", action="correct_call", fields=[field])


def _relative(path: str, field: str = "path") -> PurePosixPath:
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("~"):
        raise _refuse(path, "is absolute; give a path relative to the workspace", field)
    if ".." in pure.parts:
        raise _refuse(path, "leaves the workspace ('..' is not allowed)", field)
    return pure


def _resolve(root: Path, path: str) -> Path:
    target = (root / _relative(path)).resolve()
    if not target.is_relative_to(root):
        raise _refuse(path, "resolves outside the workspace (through a symlink)")
    return target


def _shown(root: Path, target: Path) -> str:
    return target.relative_to(root).as_posix()


def _page(items: list[str], cursor: str | None, limit: int) -> tuple[list[str], int]:
    start = 0
    if cursor is not None:
        if not cursor.isdigit() or int(cursor) > len(items):
            raise ToolError(
                f"cursor {cursor!r} is not one this tool returned",
                kind="invalid_call",
                action="correct_call",
                fields=["cursor"],
            )
        start = int(cursor)
    return items[start : start + limit], start


def _bounds(returned: int, start: int, total: int | None, hint: str) -> Bounds:
    more = total is None or start + returned < total
    return Bounds(
        returned=returned,
        total=total,
        truncated=more,
        next_cursor=str(start + returned) if more and returned else None,
        refinement_hint=hint if more else None,
    )


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_beneath(root: Path, target: Path, shown: str, flags: int, *, make_folders: bool = False) -> int:
    """A descriptor of ``target`` (resolved, inside ``root``), a plain file
    with one link: each folder on its way opened from the one before it,
    none through a symlink, then the file without following one (and
    without blocking on a FIFO). ``make_folders``: create missing folders."""
    parts = target.relative_to(root).parts
    if not parts:
        raise _refuse(shown, "is a directory")
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
        raise _refuse(shown, "does not exist") from None
    except OSError as exc:
        try:
            symlink = stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            symlink = False
        if symlink:  # where the check found a folder a moment before
            raise _refuse(shown, f"changed while it was opened ({name!r} is a symlink now); call again") from None
        why = "is not a folder" if isinstance(exc, NotADirectoryError) else f"cannot be opened ({exc.strerror})"
        raise _refuse(shown, f"cannot be reached: {name!r} on its way {why}") from None


def _open_file(folder: int, name: str, shown: str, flags: int) -> int:
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=folder)
    except FileNotFoundError:
        raise _refuse(shown, "does not exist") from None
    except IsADirectoryError:
        raise _refuse(shown, "is a directory") from None
    except OSError as exc:
        raise _refuse(shown, f"cannot be opened ({exc.strerror}); only plain files can") from None
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
        raise _refuse(shown, why)
    return fd


def _read_bytes(root: Path, target: Path, shown: str, cap: int) -> bytes:
    fd = _open_beneath(root, target, shown, os.O_RDONLY)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(fd).st_size > cap:
            raise ToolError(f"{shown} is larger than {cap} bytes; use grep to find what you need", fields=["path"])
        return handle.read(cap + 1)


def _write_text(root: Path, target: Path, shown: str, text: str) -> None:
    # No O_TRUNC: a hard-linked file must be refused before anything of it changes.
    fd = _open_beneath(root, target, shown, os.O_WRONLY | os.O_CREAT, make_folders=True)
    with os.fdopen(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(text.encode("utf-8"))


def _read_text(root: Path, target: Path, shown: str, cap: int) -> str:
    data = _read_bytes(root, target, shown, cap)
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown} is a binary file", kind="invalid_call", action="correct_call", fields=["path"])
    return data.decode("utf-8", errors="replace")


def _read_file(ctx: ToolContext, args: ReadFileArgs) -> ToolResult:
    root = workspace_root(args.workspace)
    target = _resolve(root, args.path)
    shown = _shown(root, target)
    lines = _read_text(root, target, shown, MAX_READ_FILE_BYTES).splitlines()
    total = len(lines)
    if args.offset and args.offset >= total:
        raise ToolError(
            f"offset {args.offset} is past the end of {shown} ({total} lines)",
            kind="invalid_call",
            action="correct_call",
            fields=["offset"],
        )
    page: list[str] = []
    used = 0
    for line in lines[args.offset : args.offset + args.limit]:
        size = len(json.dumps(line, ensure_ascii=False)) + 2
        if used + size > MAX_READ_CHARS:
            if not page:  # one huge line: show its start rather than nothing
                page.append(line[: MAX_READ_CHARS // 2] + " …[line cut]")
            break
        page.append(line)
        used += size
    end = args.offset + len(page)
    more = end < total
    bounds = Bounds(
        returned=len(page),
        total=total,
        truncated=more,
        next_cursor=str(end) if more else None,
        refinement_hint=f"call read_file again with offset={end} to read on" if more else None,
    )
    return ToolResult({"path": shown, "first_line": args.offset + 1, "lines": page}, bounds=bounds)


def _write_file(ctx: ToolContext, args: WriteFileArgs) -> str:
    root = workspace_root(args.workspace)
    target = _resolve(root, args.path)
    shown = _shown(root, target)
    existed = target.exists()
    _write_text(root, target, shown, args.content)
    return f"{'overwrote' if existed else 'created'} {shown} ({len(args.content.encode('utf-8'))} bytes)"


def _edit_file(ctx: ToolContext, args: EditFileArgs) -> str:
    root = workspace_root(args.workspace)
    target = _resolve(root, args.path)
    shown = _shown(root, target)
    text = _read_text(root, target, shown, MAX_READ_FILE_BYTES)
    count = text.count(args.old)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        raise ToolError(
            f"old text {where} in {shown}; it must occur exactly once (quote more surrounding lines)",
            kind="invalid_call",
            action="correct_call",
            fields=["old"],
        )
    _write_text(root, target, shown, text.replace(args.old, args.new, 1))
    return f"edited {shown}: replaced 1 occurrence"


def _matches(root: Path, pattern: str, field: str) -> tuple[list[Path], bool]:
    """Paths matching ``pattern`` that stay in the workspace, sorted; and
    whether the scan stopped at MAX_SCAN."""
    pure = _relative(pattern, field)
    if not pure.parts:
        raise _refuse(pattern, "matches no file; use '*' or '**/*' to list the workspace", field)
    found: list[Path] = []
    try:
        for path in root.glob(str(pure)):
            if len(found) >= MAX_SCAN:
                return sorted(found), True
            resolved = path.resolve()
            if resolved != root and resolved.is_relative_to(root):
                found.append(path)
    except ValueError as exc:
        raise _refuse(pattern, f"is not a valid glob: {exc}", field) from exc
    return sorted(found), False


def _glob(ctx: ToolContext, args: GlobArgs) -> ToolResult:
    root = workspace_root(args.workspace)
    paths, capped = _matches(root, args.pattern, "pattern")
    names = [_shown(root, p) + ("/" if p.is_dir() else "") for p in paths]
    page, start = _page(names, args.cursor, args.limit)
    hint = "pass next_cursor for more, or narrow the pattern (e.g. a folder or an extension)"
    return ToolResult(page, bounds=_bounds(len(page), start, None if capped else len(names), hint))


def _grep(ctx: ToolContext, args: GrepArgs) -> ToolResult:
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolError(
            f"pattern is not a valid regular expression: {exc}",
            kind="invalid_call",
            action="correct_call",
            fields=["pattern"],
        ) from exc
    root = workspace_root(args.workspace)
    paths, capped = _matches(root, args.path, "path")
    hits: list[str] = []
    for path in paths:
        if len(hits) >= MAX_SCAN:
            break
        if not path.is_file() or path.stat().st_size > MAX_GREP_FILE_BYTES:
            continue
        try:
            data = _read_bytes(root, path.resolve(), _shown(root, path), MAX_GREP_FILE_BYTES)
        except (ToolError, ValueError):
            continue  # hard-linked, special, or changed under us (now outside): not searched
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{_shown(root, path)}:{number}: {line[:MAX_GREP_LINE_CHARS]}")
                if len(hits) >= MAX_SCAN:
                    break
    capped = capped or len(hits) >= MAX_SCAN
    page, start = _page(hits, args.cursor, args.limit)
    hint = "pass next_cursor for more, or narrow the pattern or the path glob"
    return ToolResult(page, bounds=_bounds(len(page), start, None if capped else len(hits), hint))


def _tool(
    name: str,
    description: str,
    args_model: type[BaseModel],
    roles: frozenset[Role],
    run: Callable[[ToolContext, Any], str | ToolResult],
    **extra: Any,
) -> Tool:
    return Tool(name, description, args_model, roles, run, toolset="files", injected=("workspace",), **extra)


FILE_TOOLS = (
    _tool(
        "read_file",
        "Read lines of a text file in the workspace. Returns up to `limit` lines from `offset`; "
        "bounds say how many lines the file has and where to continue.",
        ReadFileArgs,
        READERS,
        _read_file,
        tags=("read-only",),
        bounded=True,
    ),
    _tool(
        "write_file",
        "Create or overwrite a file in the workspace with the given content.",
        WriteFileArgs,
        WRITERS,
        _write_file,
        tags=("execution",),
    ),
    _tool(
        "edit_file",
        "Replace one exact piece of text in a workspace file. `old` must occur exactly once; "
        "read the file first and quote enough of it to be unique.",
        EditFileArgs,
        WRITERS,
        _edit_file,
        tags=("execution",),
    ),
    _tool(
        "glob",
        "List workspace paths matching a glob such as '**/*.md' (folders end with '/').",
        GlobArgs,
        READERS,
        _glob,
        tags=("read-only",),
        bounded=True,
    ),
    _tool(
        "grep",
        "Search workspace text files for a regular expression; returns 'path:line: text' matches.",
        GrepArgs,
        READERS,
        _grep,
        tags=("read-only",),
        bounded=True,
    ),
)
