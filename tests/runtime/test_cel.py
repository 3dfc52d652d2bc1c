"""agents/cel.py: zenflow's CEL expressions read and evaluated with cel-python."""

from __future__ import annotations

import pytest

from agents import cel

STEPS = {"run-tests": {"content": "all green", "status": "completed", "result": {"services": ["api", "web"]}}}


def test_it_evaluates_a_condition_over_the_steps_a_run_gives():
    assert cel.evaluate_bool("steps['run-tests'].status == 'completed'", {"steps": STEPS}) is True
    assert cel.evaluate_bool("content.contains('LGTM') || iteration >= 3", {"content": "no", "iteration": 1}) is False


def test_it_evaluates_for_each_s_items_as_plain_values():
    assert cel.evaluate_list("steps['run-tests'].result.services", {"steps": STEPS}) == ["api", "web"]
    assert cel.evaluate("{'n': 1 + 2, 'ok': true}", {}) == {"n": 3, "ok": True}


def test_it_refuses_a_result_of_the_wrong_type_naming_the_expression():
    with pytest.raises(cel.CelError, match=r"CEL expression 'content.size\(\)' gave int, not a bool"):
        cel.evaluate_bool("content.size()", {"content": "abc"})
    with pytest.raises(cel.CelError, match="gave str, not a list"):
        cel.evaluate_list("content", {"content": "abc"})


def test_it_says_why_an_expression_failed_without_celpy_s_internals():
    with pytest.raises(cel.CelError) as caught:
        cel.evaluate_bool("missing == 1", {})

    assert str(caught.value) == "CEL expression 'missing == 1' failed: undeclared reference to 'missing'"


def test_it_gives_the_column_of_a_syntax_error():
    assert (
        cel.syntax_problem("content.contains('x') &&")
        == "CEL syntax error at column 23 in \"content.contains('x') &&\""
    )
    assert cel.syntax_problem("content.contains('x')") is None


def test_it_names_what_an_expression_reads_that_no_run_gives_but_not_what_its_macros_bind():
    bound = cel.parse("steps['a'].result.items.all(x, x > 0) && item.size() > 0")
    hyphenated = cel.parse("steps.run-tests.status == 'completed'")

    assert cel.name_hint(bound) is None
    assert cel.name_hint(hyphenated) == (
        "reads 'tests', which no run gives (it has content, index, item, iteration, result, status, steps); "
        "steps.run-tests is a subtraction in CEL: write steps['run-tests']"
    )
