"""Known secret values replaced by ``[redacted]`` in text a tool hands back.

The sandbox keeps secrets away from tool processes; this is the second line:
whatever a tool returns (a command's output, an MCP server's answer or
error) passes through ``Redactor`` before it is stored or sent to the model.
It finds only the values it was given, verbatim or JSON-escaped: an encoded
or split secret gets through (docs/sandbox.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
# Variables whose name says they hold a secret (OPENAI_API_KEY, GITHUB_TOKEN, ...).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# Shorter values are left alone: replacing every "1" or "true" would garble
# output, and a value that short is no secret worth the name.
MIN_SECRET_CHARS = 8


def secret_values(environ: Mapping[str, str], extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The values of ``environ``'s secret-named variables and ``extra``,
    those long enough to redact, longest first."""
    found = {value.strip() for name, value in environ.items() if SECRET_NAME.search(name)}
    found |= {value.strip() for value in extra if value}
    return tuple(sorted((v for v in found if len(v) >= MIN_SECRET_CHARS), key=lambda v: (-len(v), v)))


class Redactor:
    """Replaces each of ``secrets`` (and its JSON-escaped form) in text and data."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_CHARS:
                forms |= {secret, json.dumps(secret)[1:-1]}
        # Longest first: a secret inside a longer one must not leave the rest of it behind.
        ordered = sorted(forms, key=lambda v: (-len(v), v))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text) if self._pattern and text else text

    def data(self, value: Any) -> Any:
        """``value`` (JSON-like data) with every string in it redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        if isinstance(value, dict):
            return {self.text(str(key)): self.data(item) for key, item in value.items()}
        return value
