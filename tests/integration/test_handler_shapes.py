"""The handler's shapes as a client of the API meets them: the JSON Schemas
zenweb publishes for COORDINATOR_SELECTION and COORDINATOR_RESULT accept the
handler contract's examples; a command's result is {findings,
sources_visited, duration_ms, summary}; its context is stored and shown to
the model; workflow_args carry the mode and the original query; the result
says why the workflow was selected."""

from __future__ import annotations

import json

import jsonschema
import pytest
from django.test import Client

from runs.actions import do_register_workflow
from runs.models import Command
from tests.conftest import register
from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db

CLAIM = {
    "claim": "Aster Swift 14 @ $899",
    "confidence": 0.9,
    "source_name": "Example Shop",
    "source_domain": "shop.example.net",
    "url": "https://shop.example.net/p/aster-swift-14",
    "title": None,
    "source_type": "web",
    "source_ref": "shop-aster-swift-14",
}
SELECTIONS = [
    {
        "_type": "COORDINATOR_SELECTION",
        "command_received": "Run research workflow for laptops under $1000 with 16GB RAM",
        "workflow_selected": "research",
        "workflow_args": {"query": "laptops under $1000 with 16GB RAM", "original_query": "cheap laptops"},
        "status": "selected",
    },
    {
        "_type": "COORDINATOR_SELECTION",
        "command_received": "Run research workflow for laptops under $1000",
        "workflow_selected": "research",
        "workflow_args": {},
        "status": "needs_more_info",
        "missing": ["region", "currency"],
        "message": "Need region and currency to continue",
    },
    {
        "_type": "COORDINATOR_SELECTION",
        "command_received": "Run edit workflow for notes.md",
        "workflow_selected": "file_write_edit",
        "workflow_args": {"file_path": "notes.md"},
        "status": "blocked",
        "error": "Workflow not allowed in current mode",
    },
]
RESULTS = [
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run research workflow for laptops under $1000 with 16GB RAM",
        "workflow_selected": "research",
        "workflow_args": {"query": "laptops under $1000", "mode": "chat", "original_query": "cheap laptops"},
        "status": "success",
        "result": {
            "findings": [{"item": "Aster Swift 14", "price": "$899", "url": "https://shop.example.net/p/aster"}],
            "sources_visited": 3,
            "duration_ms": 4200,
        },
        "claims": [CLAIM, CLAIM | {"confidence": 0.92, "ttl": "7d"}],
        "tool_runs": [{"tool": "web_search", "status": "success", "duration_ms": 850}],
        "error": None,
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run edit workflow for notes.md",
        "status": "blocked",
        "error": "file_write_edit workflow requires code mode - currently in chat mode",
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run file read workflow for /etc/shadow",
        "workflow_selected": "file_read",
        "workflow_args": {"file_path": "/etc/shadow"},
        "status": "error",
        "error": "Permission denied: cannot read protected file",
        "result": None,
        "claims": [],
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run delete workflow for build/",
        "status": "blocked",
        "error": "Destructive operation requires explicit user approval",
        "requires_approval": True,
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run research workflow for laptops under $1000",
        "status": "needs_more_info",
        "missing": ["region", "currency"],
        "message": "Need region and currency to continue",
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Run research workflow for laptops under $1000",
        "status": "blocked",
        "error": "Missing source metadata in workflow results",
        "requires_retry": True,
    },
    {
        "_type": "COORDINATOR_RESULT",
        "command_received": "Get the thing",
        "status": "needs_clarification",
        "clarification_options": [
            {"interpretation": "Read a file", "would_select": "file_read"},
            {"interpretation": "Search the web", "would_select": "research_web"},
            {"interpretation": "Retrieve from memory", "would_select": "memory_query"},
        ],
    },
]


def published(name: str) -> dict:
    response = Client().get(f"/api/schemas/{name}")  # public: no token
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize(("name", "examples"), [("COORDINATOR_SELECTION", SELECTIONS), ("COORDINATOR_RESULT", RESULTS)])
def test_the_published_schemas_accept_every_example_of_the_contract(name, examples):
    schema = published(name)

    for example in examples:
        jsonschema.validate(example, schema)


def test_the_published_schemas_refuse_what_the_contract_does_not_allow():
    result = published("COORDINATOR_RESULT")
    selection = published("COORDINATOR_SELECTION")

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(RESULTS[0] | {"status": "done"}, result)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(RESULTS[0] | {"result": "a summary string"}, result)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(SELECTIONS[0] | {"_type": "COORDINATOR_RESULT"}, selection)
    assert Client().get("/api/schemas/TOOL").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_commands_result_has_the_contracts_shape_and_says_why(celery_worker, owner):
    register("research")
    client = api(owner)
    context = {"goal_focus": "a laptop for travel", "workflow_hint": "research", "original_query": "cheap laptops?"}

    body = post(
        client,
        "/api/commands?wait=30",
        {"command": "Run research workflow for laptops under $1000", "context": context},
    ).json()

    assert body["status"] == "success", body
    result = body["result"]
    assert set(result["result"]) == {"findings", "sources_visited", "duration_ms", "summary"}
    assert len(result["result"]["findings"]) == len(result["claims"]) > 0
    assert result["result"]["findings"][0]["url"].startswith("https://")
    assert result["result"]["sources_visited"] >= 1
    assert result["result"]["duration_ms"] >= 0 and result["result"]["summary"]
    assert result["workflow_args"]["mode"] == "chat"
    assert result["workflow_args"]["original_query"] == "cheap laptops?"
    assert result["selection_reason"] == "name given: the command names research"
    assert Command.objects.get(pk=body["id"]).context == context
    # The run's own page in the API says the same.
    detail = client.get(f"/api/runs/{body['run']['id']}").json()["coordinator_result"]
    assert detail["selection_reason"] == result["selection_reason"]
    assert detail["workflow_args"] == result["workflow_args"]
    jsonschema.validate(result, published("COORDINATOR_RESULT"))


def test_the_context_goes_to_the_model_and_a_bad_one_is_refused_by_name(owner, monkeypatch):
    do_register_workflow(ECHO, "echo.yaml")
    seen = []
    import agents.llm.scripted as scripted

    original = scripted.ScriptedProvider.complete

    def recording(self, request):
        seen.append(request)
        return original(self, request)

    monkeypatch.setattr(scripted.ScriptedProvider, "complete", recording)
    client = api(owner)

    refused = post(client, "/api/commands", {"command": "echo for tides", "context": {"goal": "x"}})
    answered = post(client, "/api/commands", {"command": "tell me a joke", "context": {"workflow_hint": "echo"}})

    assert refused.status_code == 400 and "context" in refused.content.decode()
    assert answered.status_code == 201
    prompt = seen[-1].messages[-1]["content"]
    assert "Context from the Executor" in prompt and json.dumps({"workflow_hint": "echo"}) in prompt


def test_a_trigger_match_says_which_trigger(owner, django_capture_on_commit_callbacks):
    register("commands/sourceless")
    with django_capture_on_commit_callbacks(execute=False):
        body = post(api(owner), "/api/commands", {"command": "any rumour about laptops"}).json()

    assert body["result"]["selection_reason"] == "trigger matched: rumour"
    assert body["result"]["workflow_args"] == {"mode": "chat", "original_query": "any rumour about laptops"}


def test_every_answer_carries_the_mode_and_the_original_query(owner):
    """Not only a started run's: clarification, missing inputs, a workflow
    refused in this mode and an unknown one say both too (004's shapes)."""
    for name in ("research", "code_edit", "commands/counter"):
        register(name)
    client = api(owner)
    context = {"original_query": "what did the Executor ask?"}

    answers = {
        command: post(client, "/api/commands", {"command": command, "mode": mode} | extra).json()["result"]
        for command, mode, extra in [
            ("Get the thing", "chat", {}),
            ("Run code_edit workflow", "code", {}),
            ("Run code_edit for path=notes.md", "chat", {"context": context}),
            ("Run counter workflow with count=many", "chat", {}),
        ]
    }

    statuses = [answer["status"] for answer in answers.values()]
    assert statuses == ["needs_clarification", "needs_more_info", "blocked", "error"]
    args = {command: answer["workflow_args"] for command, answer in answers.items()}
    assert args["Get the thing"] == {"mode": "chat", "original_query": "Get the thing"}
    needs = args["Run code_edit workflow"]
    assert (needs["mode"], needs["original_query"]) == ("code", "Run code_edit workflow")
    assert "path" not in needs and answers["Run code_edit workflow"]["missing"] == ["path"]
    blocked = args["Run code_edit for path=notes.md"]
    assert blocked["mode"] == "chat" and blocked["original_query"] == "what did the Executor ask?"
    assert args["Run counter workflow with count=many"]["original_query"] == "Run counter workflow with count=many"
    schema = published("COORDINATOR_RESULT")
    for answer in answers.values():
        jsonschema.validate(answer, schema)
