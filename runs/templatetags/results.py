"""A run's result as its header shows it: a long one collapsed to its first
lines, the rest behind "show all"."""

from __future__ import annotations

from dataclasses import dataclass

from django import template

register = template.Library()

# What the header shows of a result before "show all".
HEAD_LINES = 6
HEAD_CHARS = 600


@dataclass(frozen=True)
class ResultHead:
    head: str
    lines: int
    # False when the head is the whole result.
    cut: bool


@register.filter
def result_head(text: str) -> ResultHead:
    """The first HEAD_LINES lines of ``text``, at most HEAD_CHARS of it."""
    lines = text.splitlines()
    head = "\n".join(lines[:HEAD_LINES])[:HEAD_CHARS]
    return ResultHead(head=head, lines=len(lines), cut=head != text.rstrip("\n"))
