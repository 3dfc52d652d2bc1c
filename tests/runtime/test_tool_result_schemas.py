"""A tool's result schema in tool_schemas.json is what the model is sent:
no tool's is a bare string; each tool's answer, as the model reads it,
validates against the schema the catalog publishes for it (bounds
included), and a wrong answer does not, nor does it reach the model."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import jsonschema
import pytest

from agents.tools import ToolAnswer, ToolRegistry, default_registry
from agents.tools.builtin.research import RESEARCH_TOOLS
from agents.tools.builtin.result_models import MAX_OUTPUT_CHARS
from tests.runtime.tool_agent import Agent, result_of

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


def test_no_tools_result_is_a_bare_string():
    for entry in default_registry().catalog()["tools"]:
        schema = entry["result"]["schema"]

        assert schema["type"] == "object" and schema["properties"], entry["id"]
        assert schema["required"] and schema["additionalProperties"] is False, entry["id"]
        assert json.dumps(schema)  # JSON-ready


def test_the_bounds_a_tool_keeps_are_in_its_schema():
    shell = published("run_shell")["schema"]["$defs"]["ShellRun"]["properties"]
    claim = published("record_claim")["schema"]["$defs"]["ClaimRecorded"]["properties"]

    assert shell["output"]["maxLength"] == MAX_OUTPUT_CHARS + 120
    assert claim["missing"]["maxItems"] == 2


def test_what_the_model_reads_validates_against_the_published_schema(step, workspace):
    (workspace / "notes").mkdir()
    (workspace / "notes" / "plan.md").write_text("# Plan\nship it\n")
    coordinator = Agent(workspace, role="coordinator")
    answers = {
        "read_file": step.call("read_file", {"path": "notes/plan.md"}),
        "glob": step.call("glob", {"pattern": "**/*"}),
        "grep": step.call("grep", {"pattern": "ship", "path": "**/*.md"}),
        "search": step.call("search", {"query": "laptops under $1000", "limit": 3}),
        "price_history": step.call("price_history", {"document_id": "rev-aster-swift-14"}),
        "write_file": step.call("write_file", {"path": "notes/new.md", "content": "new\n"}),
        "edit_file": step.call("edit_file", {"path": "notes/plan.md", "old": "ship", "new": "sail"}),
        "send_message": step.call("send_message", {"text": "done"}),
        "forward_to_agent": coordinator.call("forward_to_agent", {"target_step_id": "nobody", "text": "hi"}),
        "narrate": coordinator.call("narrate", {"text": "working"}),
        "finalize": coordinator.call("finalize", {"summary": "all done"}),
    }
    if shutil.which("bwrap"):
        answers["run_shell"] = step.call("run_shell", {"command": "echo hi; exit 2"})

    for name, outcome in answers.items():
        jsonschema.validate(result_of(outcome), published(name)["schema"])
    assert result_of(answers["edit_file"])["result"] == {"path": "notes/plan.md", "action": "edited", "bytes": 15}
    assert result_of(answers["forward_to_agent"])["result"]["status"] == "dropped"
    wrong = result_of(answers["search"])
    wrong["result"]["findings"][0].pop("url")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, published("search")["schema"])


def test_an_answer_outside_its_result_model_never_reaches_the_model(step):
    """The registry checks every answer against its tool's model: a tool
    that breaks it is a malformed result, not a shape the model must guess."""
    registry = ToolRegistry([replace(RESEARCH_TOOLS[1], run=lambda ctx, args: ToolAnswer({"title": "x"}))])

    outcome = registry.call(step.ctx, "price_history", '{"document_id": "x"}', registry.tools())

    assert outcome.ok is False and outcome.error_kind == "malformed_result"
    assert "price_history answered outside its result model PriceHistoryResult: result.document_id" in outcome.text
