"""The builtin research toolset, driven through the registry: search with
citable sources, paging, price histories charted for people, its corpus,
and what the catalog says the tools show."""

from __future__ import annotations

import json

from agents.tools import default_registry
from agents.tools.builtin.research import corpus
from tests.runtime.tool_agent import hint_of, result_of

SOURCE_FIELDS = {"source_ref", "title", "url", "source_name", "source_domain", "source_type", "published", "snippet"}


def test_it_finds_laptops_under_a_price_with_citable_sources(step):
    outcome = step.call("search", {"query": "laptops under $1000", "limit": 20})

    found = result_of(outcome)
    findings = found["result"]["findings"]
    assert found["result"]["max_price_usd"] == 1000
    assert len(findings) >= 5
    assert found["bounds"] == {"returned": len(findings), "total": len(findings), "truncated": False}
    for finding in findings:
        assert SOURCE_FIELDS <= set(finding)
        assert finding["price_usd"] <= 1000
        assert finding["url"].startswith("https://")
        assert finding["url"].split("/")[2] == finding["source_domain"]
        assert corpus()[finding["source_ref"]].title == finding["title"]
    assert "rev-korvo-pro-16" not in {f["source_ref"] for f in findings}


def test_it_pages_search_results_without_repeats(step):
    everything = result_of(step.call("search", {"query": "laptop battery", "limit": 20}))
    seen: list[str] = []
    cursor = None
    while True:
        page = result_of(step.call("search", {"query": "laptop battery", "limit": 4, "cursor": cursor}))
        seen += [f["source_ref"] for f in page["result"]["findings"]]
        cursor = page["bounds"].get("next_cursor")
        if cursor is None:
            break
        assert page["bounds"]["truncated"] is True
        assert page["bounds"]["refinement_hint"]

    assert len(seen) == len(set(seen)) == everything["bounds"]["total"] > 4
    assert seen[:20] == [f["source_ref"] for f in everything["result"]["findings"]]


def test_it_shows_search_results_to_people_as_a_table_the_model_never_sees(step):
    outcome = step.call("search", {"query": "laptops under $1000", "limit": 3})

    [table] = outcome.artifacts
    assert table.kind == "table"
    assert table.audience == "evidence"
    assert table.source_tool == "zenweb.research.search"
    assert table.data["columns"] == ["title", "source", "price", "url"]
    findings = result_of(outcome)["result"]["findings"]
    assert [row[0] for row in table.data["rows"]] == [f["title"] for f in findings]
    assert all(row[2].startswith("$") for row in table.data["rows"])
    assert '"columns"' not in outcome.text
    assert '"rows"' not in outcome.text


def test_it_refuses_a_cursor_it_did_not_hand_out(step):
    outcome = step.call("search", {"query": "laptop", "cursor": "page-2"})

    assert outcome.ok is False
    assert "cursor 'page-2'" in outcome.text
    assert hint_of(outcome)["kind"] == "invalid_call"
    assert hint_of(outcome)["missing_fields"] == ["cursor"]


def test_it_summarizes_a_price_history_and_charts_it_for_people(step):
    history = corpus()["rev-aster-swift-14"].price_history

    outcome = step.call("price_history", {"document_id": "rev-aster-swift-14"})

    assert outcome.ok is True
    summary = json.loads(outcome.text)["result"]
    assert summary["tracked"] == 5
    assert summary["latest"] == {"date": "2025-02-10", "price_usd": 849}
    assert summary["lowest"]["price_usd"] == 849
    assert summary["highest"] == {"date": "2024-10-01", "price_usd": 949}
    [chart] = outcome.artifacts
    assert chart.kind == "timeseries"
    assert chart.audience == "evidence"
    [series] = chart.data["series"]
    assert [(x, y) for x, y in series["points"]] == [(day.isoformat(), price) for day, price in history]
    assert "2024-11-15" not in outcome.text


def test_it_suggests_close_ids_for_an_unknown_document(step):
    outcome = step.call("price_history", {"document_id": "rev-aster-swift"})

    assert outcome.ok is False
    assert "unknown document 'rev-aster-swift'" in outcome.text
    assert "rev-aster-swift-14" in outcome.text
    assert hint_of(outcome)["missing_fields"] == ["document_id"]
    assert outcome.artifacts == []


def test_it_ships_a_corpus_of_cited_consumer_tech_documents():
    documents = corpus()

    assert len(documents) >= 25
    laptops = [d for d in documents.values() if "laptop" in d.tags and d.source_type != "news"]
    assert laptops and all(d.price_history for d in laptops)
    assert {d.source_type for d in documents.values()} == {"review", "retailer", "news", "spec-sheet"}


def test_it_declares_what_the_new_tools_show_people_in_the_catalog():
    entries = {entry["id"]: entry for entry in default_registry().catalog()["tools"]}

    assert [(d["kind"], d["audience"]) for d in entries["zenweb.research.search"]["server_data"]] == [
        ("table", "evidence")
    ]
    assert entries["zenweb.research.price_history"]["server_data"][0]["kind"] == "timeseries"
    assert entries["zenweb.shell.run_shell"]["tags"] == ["execution", "destructive-capable"]
    assert {"zenweb.files.read_file", "zenweb.files.write_file", "zenweb.files.edit_file"} <= set(entries)
