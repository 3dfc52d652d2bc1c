"""PostgreSQL cannot store NUL: a text column refuses the byte and jsonb the
``\\u0000`` escape. zenweb writes what models, tools and people say, and one
NUL in it would fail the whole transaction (a turn, a command, a workflow)
with a DataError. So every string and JSON document sent to PostgreSQL has
NUL replaced by U+FFFD, the character browsers show for NUL anyway.

The dumpers are psycopg's own, registered on each new connection
(``connection_created``, by the PostgreSQL store: postgres.py): Django's
queries and zenweb's raw SQL alike.
"""

from __future__ import annotations

import json
import re
from typing import Any

from psycopg.adapt import Dumper
from psycopg.types import json as pg_json
from psycopg.types import string as pg_string

REPLACEMENT = "\ufffd"
# A \u0000 escape, not an escaped backslash followed by "u0000".
_ESCAPED_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")

# In psycopg's registration order: the last one of each format is the default.
_STR_DUMPERS = (
    pg_string.StrBinaryDumperName,
    pg_string.StrBinaryDumperVarchar,
    pg_string.StrBinaryDumper,
    pg_string.StrDumperName,
    pg_string.StrDumperVarchar,
    pg_string.StrDumper,
    pg_string.StrDumperUnknown,
)
_JSON_DUMPERS = (
    (pg_json.Json, pg_json.JsonBinaryDumper),
    (pg_json.Json, pg_json.JsonDumper),
    (pg_json.Jsonb, pg_json.JsonbBinaryDumper),
    (pg_json.Jsonb, pg_json.JsonbDumper),
)


def _str_without_nul(base: type[Dumper]) -> type[Dumper]:
    def dump(self: Dumper, obj: str) -> Any:
        return base.dump(self, obj.replace("\0", REPLACEMENT) if "\0" in obj else obj)

    return type(base.__name__, (base,), {"dump": dump})


def _json_without_nul(base: type[Dumper]) -> type[Dumper]:
    def dump(self: Dumper, obj: Any) -> Any:
        data = base.dump(self, obj)
        if data is None:
            return None
        data = bytes(data)
        return _ESCAPED_NUL.sub(rb"\1\\ufffd", data) if b"\\u0000" in data else data

    return type(base.__name__, (base,), {"dump": dump})


_DUMPERS: list[tuple[type, type[Dumper]]] = [(str, _str_without_nul(base)) for base in _STR_DUMPERS]
_DUMPERS += [(wrapper, _json_without_nul(base)) for wrapper, base in _JSON_DUMPERS]


def json_text(value: Any) -> str:
    """``value`` as JSON text PostgreSQL's jsonb takes (``\\u0000`` escapes
    replaced as the dumpers replace them), for a statement that sends a
    document as text: serialized before the statement is sent."""
    text = json.dumps(value)
    if "\\u0000" in text:
        text = _ESCAPED_NUL.sub(rb"\1\\ufffd", text.encode()).decode()
    return text


def register(connection: Any) -> None:
    """Use the NUL-free dumpers on ``connection`` (a psycopg connection)."""
    for cls, dumper in _DUMPERS:
        connection.adapters.register_dumper(cls, dumper)
