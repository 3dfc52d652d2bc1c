from __future__ import annotations

import pytest

from agents import ids
from agents.ids import Part, resolve


def test_it_composes_runtime_ids():
    assert ids.repeat_id("refine", 2, "draft") == "refine.2.draft"
    assert ids.each_id("deploy", 0, "ship") == "deploy[0].ship"
    assert ids.include_id("staging", "run") == "staging.run"
    assert ids.repeat_id("outer", 1, ids.each_id("inner", 0, "x")) == "outer.1.inner[0].x"


def test_it_parses_a_nested_runtime_id_into_its_chain():
    parts = ids.parse("outer.1.inner[0].staging.x")

    assert parts == [
        Part("outer", "repeat", 1),
        Part("inner", "each", 0),
        Part("staging", "include"),
        Part("x", "step"),
    ]
    assert ids.format_id(parts) == "outer.1.inner[0].staging.x"


def test_it_parses_step_ids_with_capitals_as_zenflow_writes_them():
    assert ids.parse("Review.1.Fix-Tests") == [Part("Review", "repeat", 1), Part("Fix-Tests", "step")]
    assert ids.parse("Deploy[0].Ship") == [Part("Deploy", "each", 0), Part("Ship", "step")]


def test_it_parses_a_top_level_id_and_an_iteration_prefix():
    assert ids.parse("draft") == [Part("draft", "step")]
    assert ids.parse("refine.0") == [Part("refine", "repeat", 0)]
    assert ids.parse("deploy[3]") == [Part("deploy", "each", 3)]


@pytest.mark.parametrize("text", ["", "_draft", "draft!", "0.draft", "refine..draft", "refine.0.1", "deploy[x].ship"])
def test_it_refuses_text_that_is_not_a_runtime_id(text):
    with pytest.raises(ValueError, match="not a runtime id"):
        ids.parse(text)


def test_it_gives_the_bare_id_and_the_enclosing_namespace():
    assert ids.bare("refine.0.draft") == "draft"
    assert ids.bare("draft") == "draft"
    assert ids.container_of("refine.0.draft") == "refine.0"
    assert ids.container_of("deploy[1].ship") == "deploy[1]"
    assert ids.container_of("staging.run") == "staging"
    assert ids.container_of("outer.1.inner[0].x") == "outer.1.inner[0]"
    assert ids.container_of("draft") is None
    assert ids.namespaces("outer.1.inner[0].x") == ["outer.1", "outer.1.inner[0]"]


LIVE = ["research", "refine.0.draft", "refine.0.review", "refine.1.draft", "refine.1.review", "staging.run"]
CONTAINERS = {"refine": "loop", "staging": "include"}


def test_it_resolves_an_exact_runtime_id():
    found = resolve("refine.0.draft", LIVE, "coordinator", CONTAINERS)

    assert (found.kind, found.runtime_id) == ("exact", "refine.0.draft")


def test_it_resolves_a_unique_bare_id():
    found = resolve("run", LIVE, "coordinator", CONTAINERS)

    assert (found.kind, found.runtime_id, found.rule) == ("bare", "staging.run", "unique")


def test_it_resolves_a_bare_id_to_the_senders_iteration():
    found = resolve("draft", LIVE, "refine.0.review", CONTAINERS)

    assert (found.kind, found.runtime_id, found.rule) == ("bare", "refine.0.draft", "sender")
    assert found.candidates == ("refine.0.draft", "refine.1.draft")


def test_it_resolves_a_bare_id_from_elsewhere_to_the_latest_iteration():
    assert resolve("draft", LIVE, "research", CONTAINERS).runtime_id == "refine.1.draft"
    assert resolve("draft", LIVE, "staging.run", CONTAINERS).runtime_id == "refine.1.draft"
    found = resolve("draft", LIVE, None, CONTAINERS)

    assert (found.kind, found.runtime_id, found.rule) == ("bare", "refine.1.draft", "latest")


def test_it_prefers_the_closest_enclosing_namespace_of_the_sender():
    live = ["outer.0.draft", "outer.1.draft", "outer.1.inner[0].x", "outer.1.inner[1].x"]

    assert resolve("draft", live, "outer.1.inner[0].x", {}).runtime_id == "outer.1.draft"
    assert resolve("x", live, "outer.1.inner[0].x", {}).runtime_id == "outer.1.inner[0].x"


def test_it_resolves_a_trailing_part_of_a_runtime_id():
    found = resolve("inner[0].x", ["outer.1.inner[0].x"], None, {})

    assert (found.kind, found.runtime_id) == ("bare", "outer.1.inner[0].x")


def test_it_rejects_a_forward_to_a_loop():
    found = resolve("refine", LIVE, "coordinator", CONTAINERS)

    assert found.kind == "container"
    assert found.rejection() == (
        "rejected: refine is a loop container; forward to one of its steps: "
        "[refine.0.draft, refine.0.review, refine.1.draft, refine.1.review]"
    )


def test_it_rejects_a_forward_to_an_include_or_an_iteration():
    assert resolve("staging", LIVE, None, CONTAINERS).rejection() == (
        "rejected: staging is an include container; forward to one of its steps: [staging.run]"
    )
    iteration = resolve("refine.1", LIVE, None, set())
    assert iteration.kind == "container"
    assert iteration.rejection() == (
        "rejected: refine.1 is a loop container; forward to one of its steps: [refine.1.draft, refine.1.review]"
    )


def test_it_rejects_a_container_that_has_no_live_steps_yet():
    found = resolve("refine", ["research"], None, CONTAINERS)

    assert found.rejection() == "rejected: refine is a loop container; forward to one of its steps: [none is running]"


def test_it_rejects_a_bare_id_of_a_nested_container():
    found = resolve("inner", ["outer.1.inner[0].x"], None, set())

    assert (found.kind, found.runtime_id) == ("container", "outer.1.inner")
    assert found.container_kind == "loop"


def test_it_reports_an_unknown_target():
    assert resolve("ghost", LIVE, None, CONTAINERS).kind == "unknown"
    assert resolve("Not An Id", LIVE, None, CONTAINERS).kind == "unknown"
