"""Answers that did not finish, against a local chat-completions server: cut
at the output token limit, stopped by a content filter, a stream that ends
or is cut before it says why it stopped; tool calls streamed without their
index (Ollama); and a server asking to wait longer than a turn waits. What
the model's endpoint received is counted from the server's own record."""

from __future__ import annotations

import pytest

from agents.llm import CompletionRequest, ProviderError
from agents.llm.base import RetryNotice
from tests.fake_openai_server import Delivery, FakeOpenAIServer
from tests.runtime.openai_requests import MESSAGES, make_provider

pytestmark = pytest.mark.usefixtures("no_ambient_openai_configuration")


def ask(server: FakeOpenAIServer, *, max_retries: int = 0, retries: list | None = None):
    provider = make_provider(server, max_retries=max_retries)
    on_retry = retries.append if retries is not None else None
    return provider.complete(CompletionRequest(agent="a", messages=MESSAGES), on_retry=on_retry)


def test_an_answer_cut_at_the_output_token_limit_is_no_answer(server: FakeOpenAIServer) -> None:
    server.push_text("The tides at the harbour are high because the mo", finish_reason="length")

    with pytest.raises(ProviderError) as caught:
        ask(server, max_retries=2)

    assert "model 'default-model' stopped at its output token limit (finish_reason length)" in str(caught.value)
    assert len(server.requests) == 1  # the same request would be cut the same way


def test_an_answer_stopped_by_a_content_filter_says_so(server: FakeOpenAIServer) -> None:
    server.push_text("", finish_reason="content_filter")

    with pytest.raises(ProviderError) as caught:
        ask(server, max_retries=2)

    assert "stopped by the endpoint's content filter (finish_reason content_filter)" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("unfinished", "said"),
    [
        # Closed cleanly, but no chunk said why the answer stopped, and no [DONE].
        (
            {
                "content": "Partial answer with no [DONE] and no fin",
                "finish_reason": None,
                "delivery": Delivery(done=False),
            },
            "the answer's stream ended unfinished (no finish_reason) after 40 characters",
        ),
        # The connection dropped mid-answer: no "could not connect" about it.
        (
            {"content": "The tides at the harbour are high.", "delivery": Delivery(cut_after=4)},
            "the answer's stream was cut off after 12 characters and 0 tool calls",
        ),
    ],
)
def test_a_stream_that_did_not_finish_is_asked_again_saying_so(server: FakeOpenAIServer, unfinished, said) -> None:
    server.push_text(**unfinished)
    server.push_text("The whole answer.")
    retries: list[RetryNotice] = []

    completion = ask(server, max_retries=1, retries=retries)

    assert completion.content == "The whole answer."
    [retry] = retries
    assert said in retry.message and "could not connect" not in retry.message


def test_tool_calls_streamed_without_their_index_stay_separate_calls(server: FakeOpenAIServer) -> None:
    server.push_tool_calls(
        [("call_a", "send_message", '{"text": "one"}'), ("call_b", "narrate", '{"text": "two"}')],
        tool_call_index=False,
    )

    completion = ask(server)

    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("call_a", "send_message", '{"text": "one"}'),
        ("call_b", "narrate", '{"text": "two"}'),
    ]


def test_a_server_asking_to_wait_longer_than_a_turn_waits_is_not_asked_again_inside_that_wait(
    server: FakeOpenAIServer,
) -> None:
    server.push_error(429, "slow down", headers={"retry-after": "120"})
    retries: list[RetryNotice] = []

    with pytest.raises(ProviderError) as caught:
        ask(server, max_retries=2, retries=retries)

    assert retries == [] and len(server.requests) == 1
    assert "rate limited (429)" in str(caught.value)
    assert "(it asks to wait 120 s, longer than a turn waits: 60 s)" in str(caught.value)
