"""Issue 45's audit: no work on text a model (or a user) wrote holds the GIL
for long or ends a turn with an exception. Each test is an attack that,
without its bound, runs for minutes holding the GIL (so its timeout fails
it) or raises out of the turn."""

from __future__ import annotations

import json

import pytest

from agents import bounded_json
from agents.expansion import ExpansionError, items_of
from agents.handler.selection import parse_selection
from agents.handler.shapes import SelectionError
from agents.llm.scripted_handler import read_args
from agents.tools.builtin.shell import destructive_reason
from agents.tools.mcp.schema import args_model
from tests.runtime.tool_agent import Agent, hint_of

# Unbounded, each attack takes from 12 s to hours; bounded, milliseconds.
# pytest-timeout interrupts a regular expression that holds the GIL.
BOUND = pytest.mark.timeout(30)
DEEP = "[" * 100_000 + "]" * 100_000


@BOUND
def test_an_unclosed_fence_and_spaces_in_a_handler_answer_is_refused_at_once():
    # 4,000 characters: r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```" backtracks for minutes.
    with pytest.raises(SelectionError, match="did not answer JSON"):
        parse_selection("```" + " " * 3_000 + "x" * 3_000, "cmd")


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"workflow_selected": "research", "status": "selected"}\n```',
        'Here: ```JSON {"workflow_selected": "research", "status": "selected"}``` done',
        '```\n{"workflow_selected": "research", "status": "selected"}```',
        '{"workflow_selected": "research", "status": "selected"}',
    ],
)
def test_a_handler_answer_is_still_read_bare_or_fenced(answer):
    assert parse_selection(answer, "cmd").workflow_selected == "research"


def test_a_handler_answer_nested_too_deeply_is_refused_not_raised():
    with pytest.raises(SelectionError):
        parse_selection(DEEP, "cmd")


@BOUND
@pytest.mark.parametrize("gap", [" " * 3_990, "," * 3_990, ", " * 1_995])
def test_a_users_command_of_spaces_and_commas_is_read_at_once(gap):
    entry = {"name": "research", "inputs": {"topic": {"type": "string"}}}

    reading = read_args(f"research topic=tides{gap}and", entry)

    assert reading.args == {"topic": "tides"}


@BOUND
def test_a_long_command_is_checked_for_destructive_patterns_at_once():
    # `git push ` 1,100 times (the 10,000 characters a command may have): 30 s to a backtracking pattern.
    assert destructive_reason("git push " * 1_100) is None
    assert destructive_reason("git push " * 1_000 + "--force") == "force push (git push --force)"
    assert destructive_reason("x" * 9_000 + " :(){ :|:& };:") == "fork bomb (:(){ :|:& };:)"
    assert destructive_reason("bomb() { bomb | bomb & }; bomb") == "fork bomb (:(){ :|:& };:)"
    assert destructive_reason("f() { g | h; }") is None


@pytest.mark.parametrize("raw", [DEEP, '{"pattern": ' + DEEP + "}"])
def test_arguments_nested_too_deeply_are_refused_not_raised(tmp_path, raw):
    agent = Agent(tmp_path)

    outcome = agent.registry.call(agent.ctx, "grep", raw, agent.registry.for_role("step", ["grep"]))

    assert outcome.ok is False
    assert "nested too deeply" in outcome.text
    assert hint_of(outcome)["kind"] == "invalid_call"


def test_arguments_past_the_size_read_are_refused_without_being_echoed(tmp_path):
    agent = Agent(tmp_path)
    raw = json.dumps({"pattern": "x" * (bounded_json.MAX_JSON_CHARS + 1)})

    outcome = agent.registry.call(agent.ctx, "grep", raw, agent.registry.for_role("step", ["grep"]))

    assert outcome.ok is False
    assert f"at most {bounded_json.MAX_JSON_CHARS:,} are read" in outcome.text
    assert len(outcome.text) < 2_000


def test_a_for_each_list_nested_too_deeply_is_an_expansion_error():
    class Loop:
        for_each = "regions"

    class Step:
        loop = Loop()

    class Scope:
        values = {"regions": DEEP}

    with pytest.raises(ExpansionError, match="nested too deeply"):
        items_of(Step(), Scope())


@BOUND
def test_an_mcp_schemas_pattern_is_matched_in_linear_time():
    # The server's pattern, a model's string: jsonschema matched it with re, 2^30 steps.
    model = args_model("Q", {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(A|A)*B$"}}})

    with pytest.raises(Exception, match="does not match"):
        model.model_validate({"q": "A" * 30})
    assert model.model_validate({"q": "A" * 30 + "B"}).model_dump() == {"q": "A" * 30 + "B"}


def test_an_mcp_schemas_pattern_properties_and_additional_properties_still_hold():
    model = args_model(
        "P",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "patternProperties": {"^x-": {"type": "integer"}},
            "additionalProperties": False,
        },
    )
    lookahead = args_model("L", {"type": "object", "patternProperties": {"(?=y)": {"type": "integer"}}})

    assert model.model_validate({"name": "a", "x-count": 1}).model_dump() == {"name": "a", "x-count": 1}
    with pytest.raises(Exception, match="is not of type 'integer'"):
        model.model_validate({"x-count": "one"})
    with pytest.raises(Exception, match="Extra inputs are not permitted"):
        model.model_validate({"other": 1})
    # A lookahead RE2 cannot express is left to the server, not matched with re.
    assert lookahead.model_validate({"yes": "anything"}).model_dump() == {"yes": "anything"}
