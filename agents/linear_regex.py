"""Regular expressions matched in time linear in the text: RE2 (the
``google-re2`` package).

Python's ``re`` backtracks: on text a model or a user wrote, one pattern can
take exponential time, and it holds the GIL meanwhile, so every request of
the process waits (``(A|A)*B`` over 27 A's: 15.8 s; issue 45). Patterns
from a model (grep's) and patterns applied to a model's or a user's text
(run_shell's destructive-command hints, an MCP server's schema) are compiled
here. RE2 has no backreferences and no lookaround: compiling such a pattern
raises ``error``, and ``reason`` says why in words.
"""

from __future__ import annotations

from typing import Any

import re2

error = re2.error


def compile(pattern: str, *, ignore_case: bool = False) -> Any:  # noqa: A001 - as re.compile
    """``pattern`` compiled for RE2; ``error`` if RE2 cannot express it."""
    options = re2.Options()
    # A pattern RE2 refuses is the caller's to answer (to the model, say), not a log line.
    options.log_errors = False
    options.case_sensitive = not ignore_case
    return re2.compile(pattern, options)


def reason(exc: BaseException) -> str:
    """RE2's reason for refusing a pattern, as text (it gives bytes)."""
    first = exc.args[0] if exc.args else exc
    return first.decode("utf-8", "replace") if isinstance(first, bytes) else str(first)
