"""Hidden characters shown, not rendered: what an approver reads is what runs.

``reveal`` escapes text for HTML and draws each invisible or reordering
character (agents/hidden_characters.py) as its escape in a marked span, so a
bidi override cannot make a command read as something else (``reveal_tokens``
also keeps each word of a command on one line); ``has_hidden``
says whether a text or JSON value holds any, for the "contains hidden
characters" flag; ``hidden_flag`` is that flag's markup.
"""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from agents.hidden_characters import escape, hidden_in, hidden_in_json_text, name_of, segments

register = template.Library()

FLAG = '<span class="hidden-flag" role="alert">contains hidden characters: shown escaped</span>'
# What a command's line may wrap at: spaces, tabs and newlines, nothing else.
_BREAKS = re.compile(r"([ \t\n]+)")


def reveal_text(text: str) -> SafeString:
    parts = []
    for part, hidden in segments(text):
        if hidden:
            parts.append(format_html('<span class="hidden-char" title="{}">{}</span>', name_of(part), escape(part)))
        else:
            parts.append(conditional_escape(part))
    return mark_safe("".join(parts))  # noqa: S308 - every part was escaped above


@register.filter
def reveal(value: Any) -> SafeString:
    """``value`` as text, HTML-escaped, each hidden character as a marked escape."""
    return reveal_text("" if value is None else str(value))


@register.filter
def reveal_tokens(value: Any) -> SafeString:
    """``reveal``, with each run of text between spaces in a ``tok`` span
    the page keeps on one line: a browser would otherwise wrap a command
    after any hyphen (``rm -`` / ``rf``), and the approver read two words."""
    parts = []
    for index, part in enumerate(_BREAKS.split("" if value is None else str(value))):
        if index % 2:
            parts.append(conditional_escape(part))
        elif part:
            parts.append(format_html('<span class="tok">{}</span>', reveal_text(part)))
    return mark_safe("".join(parts))  # noqa: S308 - every part was escaped above


@register.filter
def has_hidden(value: Any) -> bool:
    """Whether a JSON-like value (a dict, a list, a string) holds a hidden character."""
    return hidden_in(value)


@register.filter
def has_hidden_json(text: str) -> bool:
    """Whether stored JSON text (a tool call's arguments) holds one, raw or as an escape."""
    return hidden_in_json_text(text or "")


@register.simple_tag
def hidden_flag(*values: Any) -> SafeString:
    """The flag, if any of ``values`` holds a hidden character; else nothing."""
    return mark_safe(FLAG) if any(hidden_in(v) for v in values) else mark_safe("")  # noqa: S308 - constant markup
