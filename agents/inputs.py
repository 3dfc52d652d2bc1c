"""Run inputs of type ``path``: a place inside the run's workspace.

A path input is checked when the run is asked for (before any approval), so
what an approver sees is already the path that will be used: relative,
normalised, with no ``..`` step out of the workspace, no control characters
(a newline ends a shell command) and no leading ``-`` (it would read as an
option). Symlinks inside the workspace are not followed here: the sandbox
(only the run's own workspace visible) is what stops one leading out.
"""

from __future__ import annotations

import posixpath
import unicodedata


def workspace_path(value: object) -> str:
    """``value`` as a normalised path relative to the workspace; ValueError
    saying why when it is not one."""
    if not isinstance(value, str):
        raise ValueError(f"a path must be text, not {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ValueError("a path cannot be empty")
    if any(unicodedata.category(ch) == "Cc" for ch in text):
        raise ValueError("a path cannot contain control characters (newlines, tabs, NUL)")
    if text.startswith(("/", "~")):
        raise ValueError(f"{text!r} is not inside the workspace: use a path relative to it")
    if "\\" in text:
        raise ValueError(f"{text!r}: use '/' between folders, not '\\'")
    normal = posixpath.normpath(text)
    if normal == ".." or normal.startswith("../"):
        raise ValueError(f"{text!r} leads out of the workspace")
    if any(part.startswith("-") for part in normal.split("/")):
        raise ValueError(f"{text!r}: a path part cannot start with '-' (it would read as an option)")
    return normal
