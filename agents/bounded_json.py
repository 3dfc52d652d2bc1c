"""JSON from a model or a tool, read within bounds.

``json.loads`` runs in C holding the GIL for the whole text, and raises
``RecursionError`` (not a ``ValueError``) on deeply nested input, which
would end the turn instead of answering the model. Every read of
model-written JSON goes through ``loads``: past ``MAX_JSON_CHARS`` or too
deeply nested, it raises ``ValueError`` with the reason (issue 45).
"""

from __future__ import annotations

import json
from typing import Any

# Far above any tool's arguments (write_file's content is at most 256,000
# characters, 1.5 MB if every one is written as a \uXXXX escape).
MAX_JSON_CHARS = 2_000_000


def loads(text: str, *, what: str = "the JSON", max_chars: int = MAX_JSON_CHARS) -> Any:
    """``json.loads(text)``, refusing text longer than ``max_chars`` and
    nesting deeper than Python's recursion limit; ValueError either way
    (``json.JSONDecodeError``, a ValueError, for invalid JSON)."""
    if len(text) > max_chars:
        raise ValueError(f"{what}: {len(text):,} characters; at most {max_chars:,} are read")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what}: nested too deeply") from None
