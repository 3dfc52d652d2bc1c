"""Characters an approver cannot see (agents/hidden_characters.py): found in
text and in JSON values, and shown escaped (issue 45)."""

from __future__ import annotations

import json

import pytest

from agents.hidden_characters import (
    escape_hidden,
    escaped_in,
    has_hidden,
    hidden_in,
    hidden_in_json_text,
    segments,
)

# The attack: isolates and an override make a python3 -c rmtree read
# as an echo and a comment.
RELAYED = "echo ok #\u2066\u202e python3 -c \"import shutil; shutil.rmtree('src')\"\u2069\u2067"


@pytest.mark.parametrize(
    "char",
    ["\u202a", "\u202e", "\u2066", "\u2069", "\u200b", "\u200f", "\u2060", "\u2064", "\ufeff", "\x00", "\x1b",
     "\r", "\x7f", "\x85", "\u00ad", "\u2028", "\u2029", "\U000e0041", "\u3164", "\ufe0f"],
)  # fmt: skip
def test_each_kind_of_hidden_character_is_found_and_escaped(char):
    text = f"rm -rf -- build{char}"

    assert has_hidden(text)
    assert escape_hidden(text) == "rm -rf -- build" + (
        f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"
    )


@pytest.mark.parametrize("text", ["rm -rf -- build", "line one\n\tline two", "naïve café — 東京 ✓", ""])
def test_what_a_reader_sees_is_left_alone(text):
    assert not has_hidden(text)
    assert escape_hidden(text) == text
    assert not hidden_in({"command": text})


def test_the_relayed_rmtree_reads_in_its_own_order_once_escaped():
    shown = escape_hidden(RELAYED)

    assert shown == "echo ok #\\u2066\\u202e python3 -c \"import shutil; shutil.rmtree('src')\"\\u2069\\u2067"
    assert [hidden for _, hidden in segments(RELAYED)].count(True) == 4
    assert "".join(text for text, _ in segments(RELAYED)) == RELAYED


def test_json_values_are_searched_and_escaped_everywhere_keys_included():
    value = {"command": "ls", "env": [{"X\u200b": 1}], "args": ["ok", RELAYED]}

    assert hidden_in(value)
    assert hidden_in({"k\u202e": "v"})
    assert escaped_in(value) == {"command": "ls", "env": [{"X\\u200b": 1}], "args": ["ok", escape_hidden(RELAYED)]}
    assert value["env"] == [{"X\u200b": 1}]  # the original is not changed


def test_deep_nesting_is_walked_without_recursion():
    deep: list = ["\u202e"]
    for _ in range(5_000):
        deep = [deep]

    assert hidden_in(deep)
    assert escaped_in(deep) is not None


def test_stored_json_is_looked_into_through_its_escapes():
    stored = json.dumps({"command": RELAYED})  # as ToolCall.arguments is stored: ASCII, \\u escapes

    assert not has_hidden(stored)
    assert hidden_in_json_text(stored)
    assert hidden_in_json_text('{"command": "echo \u202e"}')
    assert not hidden_in_json_text(json.dumps({"command": "echo \\u202e typed as text"}))
    assert not hidden_in_json_text("not json \\u202e")
