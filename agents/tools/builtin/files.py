"""The files toolset: read, write, edit, glob and grep inside the run's workspace.

The workspace reaches each tool as the injected ``workspace`` argument; the
model never sees it. Paths and opening files without leaving the workspace
are agents/tools/builtin/workspace.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents import linear_regex
from agents.tools.base import Role, Tool, ToolContext, ToolError
from agents.tools.builtin.result_models import FileWriteResult, FileWritten, GlobResult, GrepResult, ReadFileResult
from agents.tools.builtin.workspace import (
    quota_of,
    read_bytes,
    read_text,
    refuse,
    relative,
    resolve,
    shown_as,
    workspace_root,
    write_text,
)
from agents.tools.results import MAX_RESULT_CHARS, Bounds, ToolAnswer

MAX_WRITE_CHARS = 256_000
# A page of read_file must fit the model's result cap, or the registry would
# replace it with a preview; leave room for the JSON around the lines.
MAX_READ_CHARS = MAX_RESULT_CHARS - 2_000
MAX_READ_FILE_BYTES = 10 * 1024 * 1024
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_LINE_CHARS = 300
MAX_GREP_PATTERN_CHARS = 1_000
# A glob longer than this names no file (a path part is at most 255 bytes deep in 4 KB).
MAX_GLOB_CHARS = 4_096
# All the text one grep call reads, so that its work is bounded however wide its glob.
MAX_GREP_TOTAL_BYTES = 64 * 1024 * 1024
# Past this many matches glob and grep stop counting and ask for a narrower pattern.
MAX_SCAN = 10_000

READERS: frozenset[Role] = frozenset({"coordinator", "step"})
WRITERS: frozenset[Role] = frozenset({"step"})


class _WorkspaceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: str = Field(description="The run's workspace directory (injected).")


class ReadFileArgs(_WorkspaceArgs):
    path: str = Field(min_length=1, description="File path relative to the workspace.")
    offset: int = Field(default=0, ge=0, description="Number of lines to skip (0 reads from the first line).")
    limit: int = Field(default=200, ge=1, le=2_000, description="Most lines to return.")


class WriteFileArgs(_WorkspaceArgs):
    path: str = Field(min_length=1, description="File path relative to the workspace; parent folders are created.")
    content: str = Field(max_length=MAX_WRITE_CHARS, description="The whole new content of the file.")


class EditFileArgs(_WorkspaceArgs):
    path: str = Field(min_length=1, description="File path relative to the workspace.")
    old: str = Field(
        min_length=1,
        max_length=MAX_WRITE_CHARS,
        description="Exact text to replace; it must occur exactly once in the file.",
    )
    new: str = Field(max_length=MAX_WRITE_CHARS, description="Text to put in its place.")


class GlobArgs(_WorkspaceArgs):
    pattern: str = Field(
        min_length=1, max_length=MAX_GLOB_CHARS, description="Glob relative to the workspace, e.g. 'src/**/*.py'."
    )
    limit: int = Field(default=100, ge=1, le=500, description="Most paths to return.")
    cursor: str | None = Field(default=None, description="next_cursor from a previous call, for the next page.")


class GrepArgs(_WorkspaceArgs):
    pattern: str = Field(
        min_length=1,
        max_length=MAX_GREP_PATTERN_CHARS,
        description="Regular expression (RE2 syntax: no backreferences or lookaround) searched line by line.",
    )
    path: str = Field(
        default="**/*",
        min_length=1,
        max_length=MAX_GLOB_CHARS,
        description="Glob of the files to search, e.g. '**/*.md'.",
    )
    ignore_case: bool = Field(default=False, description="Match regardless of case.")
    limit: int = Field(default=50, ge=1, le=500, description="Most matching lines to return.")
    cursor: str | None = Field(default=None, description="next_cursor from a previous call, for the next page.")


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


def _read_file(ctx: ToolContext, args: ReadFileArgs) -> ToolAnswer:
    root = workspace_root(args.workspace)
    target = resolve(root, args.path)
    shown = shown_as(root, target)
    lines = read_text(root, target, shown, MAX_READ_FILE_BYTES).splitlines()
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
    return ToolAnswer({"path": shown, "first_line": args.offset + 1, "lines": page}, bounds=bounds)


def _write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolAnswer:
    quota = quota_of(ctx)
    root = workspace_root(args.workspace, quota)
    target = resolve(root, args.path)
    shown = shown_as(root, target)
    existed = target.exists()
    write_text(root, target, shown, args.content, quota)
    written = FileWritten(path=shown, action="overwrote" if existed else "created", bytes=len(args.content.encode()))
    return ToolAnswer(written.model_dump())


def _edit_file(ctx: ToolContext, args: EditFileArgs) -> ToolAnswer:
    quota = quota_of(ctx)
    root = workspace_root(args.workspace, quota)
    target = resolve(root, args.path)
    shown = shown_as(root, target)
    text = read_text(root, target, shown, MAX_READ_FILE_BYTES)
    count = text.count(args.old)
    if count != 1:
        where = "does not occur" if count == 0 else f"occurs {count} times"
        raise ToolError(
            f"old text {where} in {shown}; it must occur exactly once (quote more surrounding lines)",
            kind="invalid_call",
            action="correct_call",
            fields=["old"],
        )
    edited = text.replace(args.old, args.new, 1)
    write_text(root, target, shown, edited, quota)
    return ToolAnswer(FileWritten(path=shown, action="edited", bytes=len(edited.encode())).model_dump())


def _matches(root: Path, pattern: str, field: str) -> tuple[list[Path], bool]:
    """Paths matching ``pattern`` that stay in the workspace, sorted; and
    whether the scan stopped at MAX_SCAN."""
    pure = relative(pattern, field)
    if not pure.parts:
        raise refuse(pattern, "matches no file; use '*' or '**/*' to list the workspace", field)
    found: list[Path] = []
    try:
        for path in root.glob(str(pure)):
            if len(found) >= MAX_SCAN:
                return sorted(found), True
            resolved = path.resolve()
            if resolved != root and resolved.is_relative_to(root):
                found.append(path)
    except ValueError as exc:
        raise refuse(pattern, f"is not a valid glob: {exc}", field) from exc
    return sorted(found), False


def _glob(ctx: ToolContext, args: GlobArgs) -> ToolAnswer:
    root = workspace_root(args.workspace)
    paths, capped = _matches(root, args.pattern, "pattern")
    names = [shown_as(root, p) + ("/" if p.is_dir() else "") for p in paths]
    page, start = _page(names, args.cursor, args.limit)
    hint = "pass next_cursor for more, or narrow the pattern (e.g. a folder or an extension)"
    return ToolAnswer(page, bounds=_bounds(len(page), start, None if capped else len(names), hint))


def _grep_regex(pattern: str, ignore_case: bool) -> Any:
    """The model's pattern compiled for RE2, which matches in time linear in
    the text: Python's ``re`` backtracks, and one pattern such as ``(A|A)*B``
    holds the GIL (and so every request of the process) for seconds per line."""
    try:
        return linear_regex.compile(pattern, ignore_case=ignore_case)
    except linear_regex.error as exc:
        reason = linear_regex.reason(exc)
    try:
        re.compile(pattern)  # compiling does no matching: it only tells which error to give
    except re.error as exc:
        message = f"pattern is not a valid regular expression: {exc}"
    else:
        message = (
            f"pattern uses syntax grep does not support ({reason}): grep matches in linear time (RE2 syntax), "
            "without backreferences (\\1), lookahead or lookbehind ((?=, (?!, (?<=, (?<!) or \\Z (write \\z)"
        )
    raise ToolError(message, kind="invalid_call", action="correct_call", fields=["pattern"])


def _grep(ctx: ToolContext, args: GrepArgs) -> ToolAnswer:
    regex = _grep_regex(args.pattern, args.ignore_case)
    root = workspace_root(args.workspace)
    paths, capped = _matches(root, args.path, "path")
    hits: list[str] = []
    budget = MAX_GREP_TOTAL_BYTES
    for path in paths:
        if len(hits) >= MAX_SCAN:
            break
        if not path.is_file() or path.stat().st_size > MAX_GREP_FILE_BYTES:
            continue
        if path.stat().st_size > budget:
            capped = True  # past the bytes one call reads: the rest is not searched
            break
        try:
            data = read_bytes(root, path.resolve(), shown_as(root, path), MAX_GREP_FILE_BYTES)
        except (ToolError, ValueError):
            continue  # hard-linked, special, or changed under us (now outside): not searched
        budget -= len(data)
        if b"\0" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line):
                hits.append(f"{shown_as(root, path)}:{number}: {line[:MAX_GREP_LINE_CHARS]}")
                if len(hits) >= MAX_SCAN:
                    break
    capped = capped or len(hits) >= MAX_SCAN
    page, start = _page(hits, args.cursor, args.limit)
    hint = "pass next_cursor for more, or narrow the pattern or the path glob"
    return ToolAnswer(page, bounds=_bounds(len(page), start, None if capped else len(hits), hint))


def _tool(
    name: str,
    description: str,
    args_model: type[BaseModel],
    roles: frozenset[Role],
    run: Callable[[ToolContext, Any], str | ToolAnswer],
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
        result_model=ReadFileResult,
    ),
    _tool(
        "write_file",
        "Create or overwrite a file in the workspace with the given content.",
        WriteFileArgs,
        WRITERS,
        _write_file,
        tags=("execution",),
        result_model=FileWriteResult,
    ),
    _tool(
        "edit_file",
        "Replace one exact piece of text in a workspace file. `old` must occur exactly once; "
        "read the file first and quote enough of it to be unique.",
        EditFileArgs,
        WRITERS,
        _edit_file,
        tags=("execution",),
        result_model=FileWriteResult,
    ),
    _tool(
        "glob",
        "List workspace paths matching a glob such as '**/*.md' (folders end with '/').",
        GlobArgs,
        READERS,
        _glob,
        tags=("read-only",),
        bounded=True,
        result_model=GlobResult,
    ),
    _tool(
        "grep",
        "Search workspace text files for a regular expression; returns 'path:line: text' matches.",
        GrepArgs,
        READERS,
        _grep,
        tags=("read-only",),
        bounded=True,
        result_model=GrepResult,
    ),
)
