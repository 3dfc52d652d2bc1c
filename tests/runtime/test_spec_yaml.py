"""The YAML under a workflow: malformed or repeated keys, a document that is
not a mapping, an empty or missing file, lines of locations, and aliases
that expand without bound."""

from __future__ import annotations

import pytest

from agents.spec import WorkflowValidationError, load_workflow
from agents.spec.yaml_locations import line_for, parse_with_locations
from tests.runtime.workflow_texts import problems, workflow, write


def test_it_reports_malformed_yaml_with_its_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1: {description: a1 agent}
        steps:
          - id: one
            agent: [a1
        """,
    )

    assert problems(path) == [f"{path}:7: invalid YAML: expected ',' or ']', but got '<stream end>'"]


def test_it_reports_a_key_repeated_in_one_mapping(tmp_path):
    path = write(tmp_path, workflow("  - id: one\n    agent: a1\n    agent: a2\n"))

    assert problems(path) == [f"{path}:6: invalid YAML: found duplicate key 'agent'"]


def test_it_rejects_a_document_that_is_not_a_mapping(tmp_path):
    path = write(tmp_path, "- name: flow\n- steps: []\n")

    assert problems(path) == [f"{path}:1: a workflow must be a mapping of fields, not a list"]


def test_it_rejects_an_empty_file(tmp_path):
    path = write(tmp_path, "# nothing here yet\n")

    assert problems(path) == [f"{path}:1: the workflow is empty"]


def test_it_reports_a_missing_file(tmp_path):
    path = tmp_path / "missing.yaml"

    with pytest.raises(WorkflowValidationError) as caught:
        load_workflow(path)

    assert str(caught.value) == f"{path}: file not found"


def test_it_maps_yaml_locations_to_lines():
    data, lines = parse_with_locations("steps:\n  - id: a\n    dependsOn:\n      - b\n")

    assert data == {"steps": [{"id": "a", "dependsOn": ["b"]}]}
    assert lines[("steps",)] == 1
    assert lines[("steps", 0)] == 2
    assert lines[("steps", 0, "dependsOn", 0)] == 4
    assert line_for(lines, ("steps", 0, "agent")) == 2


def test_it_refuses_aliases_that_expand_without_bound(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 7):
        levels.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    path = write(tmp_path, "\n".join(levels) + "\n")

    assert problems(path) == [f"{path}:5: invalid YAML: the document expands to more than 100000 values"]
