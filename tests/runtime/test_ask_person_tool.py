"""The ask_person tool without Django: its arguments capped and checked
(the question and options are a model's text), steps only, and a call that
asks its host and comes back waiting for the answer."""

from __future__ import annotations

import json
from contextlib import nullcontext

from agents.events import ListSink
from agents.router import InMemoryMailboxStore, MessageRouter
from agents.tools import ToolCallMeta, ToolContext, default_registry
from agents.tools.builtin.ask import AskPersonResult


class Host:
    """Records the questions asked; each gets the next id."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, list[str]]] = []

    def ask_person(self, ctx, question, options):
        self.asked.append((ctx.step_id, question, options))
        return str(len(self.asked))

    def isolated(self, *, held=False):
        return nullcontext()


def call(arguments: dict, role: str = "step"):
    host = Host()
    registry = default_registry()
    sink = ListSink()
    router = MessageRouter(InMemoryMailboxStore(), sink)
    ctx = ToolContext(ToolCallMeta("run-1", "run-1/s", "s/1", "call-1"), "s", role, router, sink, host=host)
    outcome = registry.call(ctx, "ask_person", json.dumps(arguments), registry.for_role(role, ["ask_person"]))
    return outcome, host.asked


def test_a_call_asks_its_host_and_waits_for_the_answer():
    outcome, asked = call({"question": "  Which region?  ", "options": ["eu", " us "]})

    assert asked == [("s", "Which region?", ["eu", "us"])]
    assert (outcome.ok, outcome.pending, outcome.approval_id) == (True, True, "1")
    assert outcome.text == "waiting for a person to answer question 1; the answer replaces this text"


def test_the_question_and_options_are_capped_and_checked_naming_the_field():
    for arguments, field in [
        ({"question": "x" * 2001}, "question"),
        ({"question": "   "}, "question"),
        ({"question": "Which?", "options": ["a"] * 2}, "options"),
        ({"question": "Which?", "options": [str(n) for n in range(11)]}, "options"),
        ({"question": "Which?", "options": ["y" * 201]}, "options.0"),
    ]:
        outcome, asked = call(arguments)
        assert (outcome.ok, asked) == (False, []), arguments
        assert f'"missing_fields": ["{field}"]' in outcome.text, outcome.text


def test_only_steps_may_ask():
    outcome, asked = call({"question": "Which?"}, role="coordinator")
    assert (outcome.ok, asked) == (False, [])
    assert "not available to the coordinator" in outcome.text


def test_its_published_result_schema_is_the_result_model():
    entry = next(e for e in default_registry().catalog()["tools"] if e["id"] == "zenweb.people.ask_person")
    assert entry["result"] == {"name": "AskPersonResult", "schema": AskPersonResult.model_json_schema()}
    assert AskPersonResult.model_validate_json('{"answered": false, "reason": "no answer came"}').answered is False
