from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agents.handler import (
    CatalogEntry,
    ClarificationOption,
    CoordinatorResult,
    CoordinatorSelection,
    Decision,
    SelectionError,
    SourcedClaim,
    claims_problem,
    decide,
    error_for_run,
    parse_selection,
    plan_selection,
    selection_request,
)
from agents.llm.scripted import ScriptedProvider
from agents.spec import parse_workflow

RESEARCH = """\
name: research
description: Search the web and report sourced findings.
triggers: [research, find, compare]
outputs: [findings, sources_visited]
inputs:
  query: {type: string, required: true, description: What to research}
  limit: {type: integer, default: 10}
  min_confidence: {type: number}
  fresh: {type: boolean}
"""
FILE_READ = """\
name: file_read
description: Read a file.
triggers: [read, file]
inputs:
  path: {type: string, required: true}
"""
FILE_WRITE_EDIT = """\
name: file_write_edit
description: Edit a file in the workspace.
triggers: [edit, write]
mode: code
inputs:
  path: {type: string, required: true}
"""
MEMORY_QUERY = """\
name: memory_query
description: Retrieve from memory.
triggers: [remember, recall]
inputs:
  topic: {type: string, required: true}
"""
DELETE_FILES = """\
name: delete_files
description: Delete files.
triggers: [delete]
destructive: true
inputs:
  path: {type: string, required: true}
"""
WORKFLOW_TAIL = """\
agents: {a: {description: a agent}}
steps: [{id: s, agent: a}]
"""


def entry(yaml_head: str) -> CatalogEntry:
    return CatalogEntry.of(parse_workflow(yaml_head + WORKFLOW_TAIL, "<test>"))


@pytest.fixture
def catalog() -> list[CatalogEntry]:
    return [entry(text) for text in (RESEARCH, FILE_READ, FILE_WRITE_EDIT, MEMORY_QUERY, DELETE_FILES)]


def handle(command: str, catalog: list[CatalogEntry], mode: str = "chat") -> Decision:
    request, _ = selection_request(command, catalog, mode)
    answer = ScriptedProvider().complete(request)
    return decide(parse_selection(answer.content, command), catalog, mode)


def selected(name: str, **args) -> CoordinatorSelection:
    return CoordinatorSelection(command_received="cmd", workflow_selected=name, workflow_args=args, status="selected")


def test_it_selects_research_with_the_text_after_for_as_the_query(catalog):
    decision = handle("Run research workflow for laptops under $1000", catalog)

    assert decision.result is None
    assert decision.entry.name == "research"
    assert decision.args == {"query": "laptops under $1000", "limit": 10}
    assert decision.requires_approval is False


def test_it_takes_name_value_pairs_from_the_command(catalog):
    decision = handle('Run research for "quiet keyboards" limit=3 fresh: yes', catalog)

    assert decision.args == {"query": "quiet keyboards", "limit": 3, "fresh": True}


def test_it_takes_a_value_after_an_inputs_name_and_free_text_after_about():
    catalog = [
        entry("name: ship\ntriggers: [deploy]\ninputs:\n  regions: {type: string, default: 'eu,us,asia'}\n"),
        entry("name: hub\ntriggers: [hub]\ninputs:\n  topic: {type: string, default: laptops}\n"),
    ]

    assert handle("deploy regions eu,us", catalog).args == {"regions": "eu,us"}
    assert handle("deploy regions to everyone", catalog).args == {"regions": "everyone"}
    assert handle("Run hub about tides and moons", catalog).args == {"topic": "tides and moons"}


def test_it_asks_for_clarification_when_the_command_names_no_workflow(catalog):
    decision = handle("Get the thing", catalog)

    assert decision.entry is None
    assert decision.result.status == "needs_clarification"
    options = [o.would_select for o in decision.result.clarification_options]
    assert options == ["research", "file_read", "file_write_edit", "memory_query", "delete_files"]
    assert decision.result.clarification_options[0].interpretation == "Search the web and report sourced findings."


def test_it_lists_every_tied_workflow_as_an_option(catalog):
    decision = handle("find what I recall about the move", catalog)

    assert decision.result.status == "needs_clarification"
    assert [o.would_select for o in decision.result.clarification_options] == ["research", "memory_query"]


def test_it_ranks_the_options_by_how_well_each_workflow_matches_the_command(catalog):
    decision = handle("retrieve it from memory", catalog)

    assert decision.result.status == "needs_clarification"
    options = [o.would_select for o in decision.result.clarification_options]
    assert options[0] == "memory_query"
    assert sorted(options) == sorted(["research", "file_read", "file_write_edit", "memory_query", "delete_files"])


def test_offline_a_command_naming_a_workflow_the_catalog_lacks_is_unknown(catalog):
    decision = handle("Please run the teleport workflow to Mars", catalog)

    assert decision.entry is None
    assert (decision.result.status, decision.result.error) == ("error", "Unknown workflow: teleport")
    assert handle("run the workflow", catalog).result.status == "needs_clarification"


def test_it_reports_an_unknown_workflow_as_an_error_and_starts_nothing(catalog):
    decision = decide(selected("teleport", query="x"), catalog, "chat")

    assert decision.entry is None
    assert decision.result.status == "error"
    assert decision.result.error == "Unknown workflow: teleport"
    assert decision.result.workflow_selected is None


def test_it_blocks_a_code_mode_workflow_in_chat_mode(catalog):
    decision = decide(selected("file_write_edit", path="a.txt"), catalog, "chat")

    assert decision.entry is None
    assert decision.result.status == "blocked"
    assert decision.result.error == "file_write_edit workflow requires code mode - currently in chat mode"
    # 004's blocked selection keeps the arguments it read.
    assert decision.result.workflow_args == {"path": "a.txt"}


def test_it_runs_a_code_mode_workflow_in_code_mode(catalog):
    decision = handle("Run edit workflow for notes.txt", catalog, mode="code")

    assert decision.entry.name == "file_write_edit"
    assert decision.args == {"path": "notes.txt"}


def test_it_blocks_the_scripted_choice_of_a_code_mode_workflow_in_chat_mode(catalog):
    decision = handle("Run edit workflow for notes.txt", catalog)

    assert decision.result.status == "blocked"
    assert decision.result.error == "file_write_edit workflow requires code mode - currently in chat mode"


def test_it_needs_more_info_when_a_required_input_is_missing(catalog):
    decision = handle("Run the file_read workflow", catalog)

    assert decision.entry is None
    assert decision.result.status == "needs_more_info"
    assert decision.result.missing == ["path"]
    assert decision.result.message == "Need path to continue"


def test_it_reports_a_wrong_type_naming_the_field(catalog):
    decision = decide(selected("research", query="tents", limit="lots"), catalog, "chat")

    assert decision.result.status == "error"
    assert decision.result.error == "Invalid parameter limit: expected integer, got 'lots'"


def test_it_coerces_values_to_the_input_types(catalog):
    decision = decide(selected("research", query=42, limit="7", min_confidence="0.5", fresh="No"), catalog, "chat")

    assert decision.args == {"query": "42", "limit": 7, "min_confidence": 0.5, "fresh": False}


def test_it_refuses_a_boolean_where_an_integer_is_expected(catalog):
    decision = decide(selected("research", query="tents", limit=True), catalog, "chat")

    assert decision.result.error == "Invalid parameter limit: expected integer, got True"


def test_it_fills_defaults_and_drops_undeclared_args(catalog):
    decision = decide(selected("research", query="tents", mode="chat", original_query="tents?"), catalog, "chat")

    assert decision.args == {"query": "tents", "limit": 10}


def test_it_asks_for_approval_before_a_destructive_workflow(catalog):
    decision = handle("delete the old logs for /tmp/logs", catalog)

    assert decision.entry.name == "delete_files"
    assert decision.result is None
    assert decision.requires_approval is True


def test_it_keeps_only_clarification_options_from_the_catalog(catalog):
    selection = CoordinatorSelection(
        command_received="Get the thing",
        status="needs_clarification",
        clarification_options=[
            ClarificationOption(interpretation="Read a file", would_select="file_read"),
            ClarificationOption(interpretation="Summon", would_select="summon"),
        ],
    )

    decision = decide(selection, catalog, "chat")

    assert [o.would_select for o in decision.result.clarification_options] == ["file_read"]


def test_it_passes_on_a_blocked_selection(catalog):
    selection = CoordinatorSelection(command_received="cmd", workflow_selected="file_read", status="blocked")

    decision = decide(selection, catalog, "chat")

    assert decision.result.status == "blocked"
    assert decision.result.workflow_selected == "file_read"
    assert decision.result.error == "Workflow not allowed in current mode"


def test_it_parses_a_bare_json_selection_without_a_type():
    selection = parse_selection('{"workflow_selected": "research", "status": "selected", "missing": null}', "cmd")

    assert selection.workflow_selected == "research"
    assert selection.command_received == "cmd"
    assert selection.to_data()["_type"] == "COORDINATOR_SELECTION"


def test_it_parses_a_selection_in_a_json_fence():
    text = 'Here you go:\n```json\n{"_type": "COORDINATOR_SELECTION", "status": "needs_more_info"}\n```'

    assert parse_selection(text, "cmd").status == "needs_more_info"


def test_it_refuses_an_answer_that_is_not_json():
    with pytest.raises(SelectionError, match="the model did not answer JSON: I think research"):
        parse_selection("I think research is best", "cmd")


def test_it_names_the_field_of_an_invalid_selection():
    with pytest.raises(SelectionError, match="field 'status'"):
        parse_selection('{"workflow_selected": "research", "status": "chosen"}', "cmd")


def test_it_refuses_a_selected_status_without_a_workflow():
    with pytest.raises(SelectionError, match="workflow_selected"):
        parse_selection('{"status": "selected"}', "cmd")


def test_it_builds_the_selection_request(catalog):
    request, compacted = selection_request("Run research workflow for tents", catalog, "chat")

    assert compacted is False
    assert request.agent == "workflow_handler"
    assert request.temperature == 0.4
    system, user = (m["content"] for m in request.messages)
    assert "never invent a workflow" in system.lower()
    assert "COORDINATOR_SELECTION" in system
    assert "The current mode is chat" in system
    assert "Run research workflow for tents" in user
    assert all(e.name in user for e in catalog)
    assert "Search the web and report sourced findings." in user
    assert request.variables["command"] == "Run research workflow for tents"
    assert [e["name"] for e in json.loads(request.variables["catalog_json"])] == [e.name for e in catalog]


def test_it_sends_the_compact_catalog_when_the_full_one_is_over_budget():
    description = "A workflow with a long description. " * 20
    entries = [
        CatalogEntry(name=f"flow_{n}", description=description, triggers=(f"word{n}",), outputs=("x",))
        for n in range(40)
    ]

    request, compacted = selection_request("Run flow_3 for x", entries, "chat")

    user = request.messages[1]["content"]
    assert compacted is True
    assert description not in user
    assert all(e.name in user for e in entries)
    assert description in request.variables["catalog_json"]


def test_the_compact_catalog_says_each_workflow_on_one_short_line():
    spec = parse_workflow(
        """
name: ship_regions
mode: code
destructive: true
triggers: [ship]
inputs:
  regions: {type: string, required: true}
  limit: {type: integer, default: 5}
  note: {type: string}
agents: {a: {description: a agent}}
steps:
  - id: each
    loop: {forEach: regions, steps: [{id: s, agent: a}]}
""",
        "ship.yaml",
    )
    entries = [CatalogEntry.of(spec)] + [CatalogEntry(name=f"flow_{n}", description="d " * 400) for n in range(10)]

    request, compacted = selection_request("ship to eu", entries, "code")

    user = request.messages[1]["content"]
    assert compacted is True
    line = '{"name":"ship_regions","triggers":["ship"],"inputs":"regions[], limit?:integer=5, note?",'
    assert line + '"mode":"code","destructive":true}' in user
    assert '{"name":"flow_0","triggers":[]}' in user
    assert "name? (optional)" in user  # the shorthand is said once, above the catalog


def test_it_renders_the_iteration_markdown_with_a_claims_table():
    result = CoordinatorResult(
        command_received="Run research workflow for laptops",
        workflow_selected="research",
        workflow_args={"query": "laptops", "limit": 10},
        status="success",
        result={"findings": [{"item": "a"}, {"item": "b"}]},
        claims=[SourcedClaim(claim="Laptop | A\n@ $900", confidence=0.9, source_domain="shop.example", ttl="24h")],
    )

    assert result.to_markdown(3) == (
        "### Executor Iteration 3\n"
        "**Action:** COMMAND\n"
        '**Command:** "Run research workflow for laptops"\n'
        '**Coordinator:** research → "laptops"\n'
        "**Result:** SUCCESS - 2 results found\n"
        "**Claims:**\n"
        "| Claim | Confidence | Source | TTL |\n"
        "|-------|------------|--------|-----|\n"
        "| Laptop \\| A @ $900 | 0.90 | shop.example | 24h |"
    )


def test_it_renders_errors_and_clarifications_in_markdown():
    error = CoordinatorResult(command_received="c", status="error", error="Unknown workflow: teleport")
    clarify = CoordinatorResult(
        command_received="Get the thing",
        status="needs_clarification",
        clarification_options=[ClarificationOption(interpretation="Read a file", would_select="file_read")],
    )

    assert "**Result:** ERROR - Unknown workflow: teleport" in error.to_markdown(1)
    assert "**Coordinator:** no workflow selected" in error.to_markdown(1)
    assert "**Result:** NEEDS_CLARIFICATION - Read a file (file_read)" in clarify.to_markdown(2)


def test_it_dumps_results_with_the_seed_type_field():
    data = CoordinatorResult(command_received="c", status="blocked", requires_approval=True).to_data()

    assert data["_type"] == "COORDINATOR_RESULT"
    assert data["requires_approval"] is True


def test_it_reads_claim_ttls():
    now = datetime(2026, 2, 5, 12, 0, tzinfo=UTC)

    def expiry(ttl):
        return SourcedClaim(claim="c", confidence=0.5, ttl=ttl).expires_at(now)

    assert expiry("30m") == now + timedelta(minutes=30)
    assert expiry("24h") == now + timedelta(hours=24)
    assert expiry("7d") == now + timedelta(days=7)
    assert expiry("3600") == now + timedelta(hours=1)
    assert expiry(None) is None


def test_it_refuses_a_ttl_it_cannot_read():
    with pytest.raises(ValidationError, match="invalid ttl 'soon'"):
        SourcedClaim(claim="c", confidence=0.5, ttl="soon")


def test_it_refuses_a_confidence_outside_zero_to_one():
    with pytest.raises(ValidationError, match="confidence"):
        SourcedClaim(claim="c", confidence=1.5)


def test_it_offers_only_http_urls():
    def url(value):
        return SourcedClaim(claim="c", confidence=0.5, url=value).safe_url()

    assert url("https://shop.example/a") == "https://shop.example/a"
    assert url("javascript:alert(1)") is None
    assert url("JavaScript://shop.example/%0Aalert(1)") is None
    assert url("/relative") is None
    assert url(None) is None


def test_it_reports_claims_without_source_metadata():
    sourced = SourcedClaim(claim="a", confidence=0.9, url="https://x.example", source_ref="ref-1")
    unsourced = SourcedClaim(claim="b", confidence=0.9, url="https://x.example")

    assert claims_problem([sourced]) is None
    assert claims_problem([]) is None
    assert claims_problem([sourced, unsourced]) == "Missing source metadata in workflow results"
    assert unsourced.lacks_source() is True


def test_it_maps_run_errors_to_the_seed_table():
    assert error_for_run("failed", "step s timed out after 30s") == "Workflow execution timed out"
    assert error_for_run("failed", "Timeout") == "Workflow execution timed out"
    assert error_for_run("failed", "Connection refused") == "Network error: Connection refused"
    assert error_for_run("failed", "Permission denied") == "Permission denied"
    assert error_for_run("cancelled", "") == "run ended cancelled"


def test_a_chosen_workflow_is_told_to_the_model_and_read_for_its_inputs(catalog):
    # "read" and "file" name file_read; the person chose research for this command.
    [research] = [e for e in catalog if e.name == "research"]
    plan = plan_selection("read the file about tents", [research], "chat", chosen="research")

    assert 'The person chose the workflow "research" for this command' in plan.request.messages[1]["content"]
    answer = ScriptedProvider().complete(plan.request)
    decision = decide(parse_selection(answer.content, "read the file about tents"), [research], "chat")
    assert decision.entry is research and decision.args["query"] == "read the file about tents"
