"""The workflow parser never crashes: whatever YAML it is given, it returns a
workflow or raises WorkflowValidationError whose problems each name a place."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.spec import WorkflowSpec, WorkflowValidationError, parse_workflow

KEYS = [
    "name",
    "version",
    "description",
    "inputs",
    "agents",
    "steps",
    "options",
    "tool",
    "triggers",
    "mode",
    "destructive",
    "approvals",
    "approval",
    "id",
    "agent",
    "dependsOn",
    "loop",
    "include",
    "with",
    "script",
    "tools",
    "say",
    "calls",
    "maxIterations",
    "forEach",
    "until",
    "type",
    "required",
    "default",
    "maxWorkers",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.floats(allow_nan=False, width=32),
    st.sampled_from(["a", "s1", "coordinator", "chat", "code", "x" * 70, "$query", "../up.yaml", "1d"]),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), children, max_size=5),
    ),
    max_leaves=25,
)
# Mostly workflow-shaped documents, so the checks past the schema run too.
documents = st.fixed_dictionaries(
    {"name": st.one_of(st.just("fuzz"), scalars), "agents": values, "steps": values},
    optional={key: values for key in KEYS if key not in ("name", "agents", "steps")},
)


def check(text: str) -> None:
    try:
        spec = parse_workflow(text, "fuzz.yaml")
    except WorkflowValidationError as exc:
        assert exc.problems, "an error without problems"
        for problem in exc.problems:
            assert problem.source == "fuzz.yaml" and problem.message
    else:
        assert isinstance(spec, WorkflowSpec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_it_answers_any_workflow_shaped_document_with_a_spec_or_located_problems(document):
    check(yaml.safe_dump(document, sort_keys=False))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_it_answers_any_text_with_a_spec_or_located_problems(text):
    check(text)
