"""A tool's result schema in tool_schemas.json is what the model is sent:
each typed tool's answer, as the model reads it, validates against the
schema the catalog publishes for it (bounds included), and a wrong answer
does not."""

from __future__ import annotations

import json

import jsonschema
import pytest

from agents.tools import default_registry
from tests.runtime.tool_agent import result_of

TYPED = ["read_file", "glob", "grep", "search"]


def published(name: str) -> dict:
    entry = next(e for e in default_registry().catalog()["tools"] if e["id"].endswith(f".{name}"))
    return entry["result"]


@pytest.mark.parametrize("name", TYPED)
def test_a_typed_tools_schema_is_its_result_model_with_bounds(name):
    result = published(name)

    assert result["schema"]["type"] == "object"
    assert set(result["schema"]["required"]) == {"result", "bounds"}
    bounds = result["schema"]["$defs"]["Bounds"]["properties"]
    assert bounds["returned"]["minimum"] == 0


def test_what_the_model_reads_validates_against_the_published_schema(step, workspace):
    (workspace / "notes").mkdir()
    (workspace / "notes" / "plan.md").write_text("# Plan\nship it\n")
    answers = {
        "read_file": step.call("read_file", {"path": "notes/plan.md"}),
        "glob": step.call("glob", {"pattern": "**/*"}),
        "grep": step.call("grep", {"pattern": "ship", "path": "**/*.md"}),
        "search": step.call("search", {"query": "laptops under $1000", "limit": 3}),
    }

    for name, outcome in answers.items():
        jsonschema.validate(result_of(outcome), published(name)["schema"])
    wrong = result_of(answers["search"])
    wrong["result"]["findings"][0].pop("url")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, published("search")["schema"])


def test_a_text_tool_says_its_result_is_text():
    result = published("write_file")

    assert result == {"name": "Text", "schema": {"type": "string", "description": result["schema"]["description"]}}
    assert json.dumps(result)  # JSON-ready
