"""Characters a person cannot see in a tool's arguments, found and escaped.

What an approver reads must be what runs. Bidi overrides and isolates
(U+202A-202E, U+2066-2069) reorder what is displayed, so that a relayed
``python3 -c ... rmtree("src")`` can read as an ``echo`` followed by a
comment; zero-width characters (U+200B-200F, U+2060-2064, U+FEFF), the other
format characters (Unicode category Cf), control characters (Cc) other than
newline and tab, and the line and paragraph separators (Zl, Zp) are
invisible or move text. A few letters and marks that draw nothing (Hangul
fillers, variation selectors) hide text the same way. Each is shown as its
escape (``\\u202e``), and the text is flagged (issue 45; docs/security.md).

Pure functions: the dashboard's ``reveal`` filter and the API's approval
objects use them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

# Shown as they are: a command's lines and indentation are what they seem.
_KEPT = frozenset("\n\t")
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
# Not Cc/Cf but drawn as nothing: the combining grapheme joiner, the Hangul
# and Khmer fillers, and the variation selectors.
_BLANK = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# Text stored as JSON is parsed to look inside its escapes only up to this size.
MAX_JSON_CHARS = 1_000_000


def is_hidden(char: str) -> bool:
    """Whether one character is invisible or reorders what is displayed."""
    if char in _KEPT:
        return False
    return unicodedata.category(char) in _HIDDEN_CATEGORIES or _BLANK.match(char) is not None


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds a character a reader would not see."""
    # isprintable is False for every Cc, Cf, Zl and Zp character (and some
    # harmless ones, such as a no-break space): only then look one by one.
    if not text.replace("\n", "").replace("\t", "").isprintable() and any(map(is_hidden, text)):
        return True
    return _BLANK.search(text) is not None


def escape(char: str) -> str:
    """``\\u202e`` for one character (``\\U000e0041`` past the BMP)."""
    point = ord(char)
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def name_of(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``, for a tooltip."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def escape_hidden(text: str) -> str:
    """``text`` with each hidden character replaced by its escape."""
    if not has_hidden(text):
        return text
    return "".join(escape(c) if is_hidden(c) else c for c in text)


def segments(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as runs of visible text ``(text, False)`` and single hidden
    characters ``(char, True)``, in order, for a renderer to mark the latter."""
    if not has_hidden(text):
        if text:
            yield text, False
        return
    start = 0
    for index, char in enumerate(text):
        if is_hidden(char):
            if start < index:
                yield text[start:index], False
            yield char, True
            start = index + 1
    if start < len(text):
        yield text[start:], False


def hidden_in(value: Any) -> bool:
    """Whether any string in a JSON-like ``value`` (keys included) holds a
    hidden character. Walks without recursion: nesting depth costs nothing."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_hidden(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def hidden_in_json_text(text: str) -> bool:
    """Whether stored JSON ``text`` holds a hidden character, raw or written
    as a JSON escape (``"\\u202e"``, as ``json.dumps`` stores it)."""
    if has_hidden(text):
        return True
    if "\\u" not in text or len(text) > MAX_JSON_CHARS:
        return False
    try:
        return hidden_in(json.loads(text))
    except (ValueError, RecursionError):
        return False


def escaped_in(value: Any) -> Any:
    """A copy of a JSON-like ``value`` with every string (keys included) passed
    through ``escape_hidden``. Walks without recursion."""
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        item, parent, key = stack.pop()
        if isinstance(item, str):
            parent[key] = escape_hidden(item)
        elif isinstance(item, dict):
            copy: dict[Any, Any] = {}
            parent[key] = copy
            for name, inner in item.items():
                shown = escape_hidden(name) if isinstance(name, str) else name
                copy[shown] = None
                stack.append((inner, copy, shown))
        elif isinstance(item, list | tuple):
            items: list[Any] = [None] * len(item)
            parent[key] = items
            stack.extend((inner, items, index) for index, inner in enumerate(item))
        else:
            parent[key] = item
    return holder[0]
