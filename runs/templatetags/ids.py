"""Ids as a reader reads them: ``id_breaks`` lets an id (a step's
``deploy[7].ship``, a worker's ``host:pid@start:thread``) wrap only after
its separators, never inside a word, where a narrow column would otherwise
split it anywhere ("depl oy[0 ].shi p")."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# A line may break after each of these, and before an opening bracket.
_AFTER = re.compile(r"([._\-:/@\]])")
_BEFORE = re.compile(r"(?=\[)")


@register.filter
def id_breaks(value: Any) -> SafeString:
    """``value`` HTML-escaped, with a ``<wbr>`` after each separator (``. _ - : / @ ]``) and before ``[``."""
    parts = []
    for piece in _AFTER.split("" if value is None else str(value)):
        if _AFTER.fullmatch(piece):
            parts.append(conditional_escape(piece) + "<wbr>")
        else:
            parts.append("<wbr>".join(conditional_escape(chunk) for chunk in _BEFORE.split(piece)))
    return mark_safe("".join(parts))  # noqa: S308 - every piece was escaped above
