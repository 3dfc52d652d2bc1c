"""The offline command path never guesses (issue 24, finding 8): with the
scripted provider, a command against the shipped catalog starts exactly the
workflow and inputs it says, or starts nothing and names what it needs.

Each row goes the whole offline way: the handler's selection request, the
scripted provider's COORDINATOR_SELECTION, ``decide``. A run row gives the
inputs the command said (before the workflow's defaults fill the rest);
other rows give the status and the input it names."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.handler import CatalogEntry, Decision, decide, parse_selection, plan_selection
from agents.llm.scripted import ScriptedProvider
from agents.spec import load_workflow

CATALOG_DIR = Path(__file__).resolve().parents[2] / "runs" / "catalog"
CATALOG = [CatalogEntry.of(load_workflow(path)) for path in sorted(CATALOG_DIR.glob("*.yaml"))]
# The clarification a command that names no workflow gets: the catalog's first five.
ANY = ["cleanup_workspace", "code_edit", "hub_and_spoke", "loop_review", "regions_foreach"]


def read(command: str, mode: str = "chat") -> tuple[Decision, dict]:
    plan = plan_selection(command, CATALOG, mode)
    selection = parse_selection(ScriptedProvider().complete(plan.request).content, command)
    return decide(selection, CATALOG, mode), selection.workflow_args


def outcome(command: str, mode: str = "chat") -> tuple:
    decision, said = read(command, mode)
    if decision.entry is not None:
        return ("run", decision.entry.name, said)
    result = decision.result
    return (result.status, result.workflow_selected, result.missing)


def run(workflow: str, **said) -> tuple:
    return ("run", workflow, said)


SEED_004 = [
    # §3.1 and §7.1: "Run research workflow for <item> under <budget> with <constraint>"
    (
        "Run research workflow for laptops under $1000 with 16GB RAM",
        run("research", query="laptops under $1000 with 16GB RAM"),
    ),
    # §7.4: "Run research workflow for <item> under <budget>"
    ("Run research workflow for laptops under $1000", run("research", query="laptops under $1000")),
    # §5.1: "Run <category> workflow for <goal>", "Run <workflow_name> for <goal>", "Run <workflow> with <constraints>"
    ("Run research workflow for tablets under $300", run("research", query="tablets under $300")),
    ("Run research_brief for tablets under $300", run("research_brief", query="tablets under $300")),
    ("Run regions_foreach with regions=eu,us", run("regions_foreach", regions=["eu", "us"])),
    # §6.2: "Run edit workflow for <file>" in chat mode
    ("Run edit workflow for notes.txt", ("blocked", "code_edit", [])),
    # §7.2: "Run file read workflow for <restricted_path>": no such workflow here
    ("Run file read workflow for /etc/shadow", ("needs_clarification", None, [])),
    # §7.3: "Run delete workflow for <path>" (destructive: it waits for approval)
    ("Run delete workflow for build", run("cleanup_workspace", target="build")),
    # §11: "Get the thing"
    ("Get the thing", ("needs_clarification", None, [])),
]

PHRASINGS = [
    # The two guesses.
    ("deploy to eu and us", run("regions_foreach", regions=["eu", "us"])),
    ("summarize tablets", run("hub_and_spoke", topic="tablets")),
    # Lists, said every way.
    ("deploy to eu, us", run("regions_foreach", regions=["eu", "us"])),
    ("ship to EU/US", run("regions_foreach", regions=["eu", "us"])),
    ("Deploy to EU & US", run("regions_foreach", regions=["eu", "us"])),
    ("deploy regions eu,us", run("regions_foreach", regions=["eu", "us"])),
    ("deploy regions=eu,us", run("regions_foreach", regions=["eu", "us"])),
    ('deploy regions: ["eu", "us"]', run("regions_foreach", regions=["eu", "us"])),
    ("deploy to eu, us and asia", run("regions_foreach", regions=["eu", "us", "asia"])),
    ("deploy to eu, us, and asia", run("regions_foreach", regions=["eu", "us", "asia"])),
    ("deploy to both eu and us", run("regions_foreach", regions=["eu", "us"])),
    ("deploy to the eu and us regions", run("regions_foreach", regions=["eu", "us"])),
    ("ship release to us", run("regions_foreach", regions=["us"])),
    # A value is never corrected, even when it looks like a slip.
    ("deploy to eu and su", run("regions_foreach", regions=["eu", "su"])),
    # Lists it cannot read with certainty.
    ("deploy to eu or us", ("needs_clarification", "regions_foreach", ["regions"])),
    ("deploy to all regions", ("needs_clarification", "regions_foreach", ["regions"])),
    ("deploy everywhere except asia", ("needs_clarification", "regions_foreach", ["regions"])),
    ("deploy to eu and", ("needs_clarification", "regions_foreach", ["regions"])),
    ("deploy to", ("needs_more_info", "regions_foreach", ["regions"])),
    # Said nothing about it: the workflow's declared default.
    ("deploy", run("regions_foreach")),
    ("Run hub_and_spoke", run("hub_and_spoke")),
    # Free text, with the words around it.
    ("Summarize tablets", run("hub_and_spoke", topic="tablets")),
    ("Can you summarize tablets?", run("hub_and_spoke", topic="tablets")),
    ("summarise tablets please", run("hub_and_spoke", topic="tablets")),
    ("Run hub_and_spoke about tides", run("hub_and_spoke", topic="tides")),
    ("hub and spoke about ocean tides", run("hub_and_spoke", topic="ocean tides")),
    ("Run hub_and_spoke with topic=tides", run("hub_and_spoke", topic="tides")),
    ("summarize topic tides", run("hub_and_spoke", topic="tides")),
    ("Please run the research workflow for monitors.", run("research", query="monitors")),
    ("Find prices for monitors", run("research", query="monitors")),
    ("Compare sources on e-readers", run("research", query="e-readers")),
    ('Run research for "quiet keyboards"', run("research", query="quiet keyboards")),
    ("Run research with query=quiet keyboards", run("research", query="quiet keyboards")),
    ("Run research workflow for query optimization tips", run("research", query="query optimization tips")),
    ("proofread the launch note about the new dashboard", run("loop_review", topic="new dashboard")),
    ("draft a launch note about dark mode", run("loop_review", topic="dark mode")),
    ("review the launch note", run("loop_review")),
    ("plan workers for a buying guide on tablets", run("research_brief", query="buying guide on tablets")),
    ("wipe the scratch space", run("cleanup_workspace", target="scratch space")),
    ("Run cleanup workspace workflow", run("cleanup_workspace")),
    # A required input not given, or started and not given.
    ("Run research workflow", ("needs_more_info", "research", ["query"])),
    ("research", ("needs_more_info", "research", ["query"])),
    ("Run research workflow for", ("needs_more_info", "research", ["query"])),
    # An input said twice, two ways.
    ("summarize tides topic=currents", ("needs_clarification", "hub_and_spoke", ["topic"])),
    ("Run research for tablets query=phones", ("needs_clarification", "research", ["query"])),
    # Typos: one slip in a word of five letters or more is read; more is not.
    ("Run reserch workflow for tablets", run("research", query="tablets")),
    ("Run research wrokflow for tablets", run("research", query="tablets")),
    ("sumarize tablets", run("hub_and_spoke", topic="tablets")),
    ("deplyo to eu and us", run("regions_foreach", regions=["eu", "us"])),
    ("relase to eu", run("regions_foreach", regions=["eu"])),
    ("sumary of tablets", ("needs_clarification", None, [])),
    # No workflow, or two equally.
    ("Do something", ("needs_clarification", None, [])),
    ("summarize prices", ("needs_clarification", None, [])),
]


@pytest.mark.parametrize(("command", "expected"), SEED_004 + PHRASINGS, ids=[c for c, _ in SEED_004 + PHRASINGS])
def test_it_reads_exactly_what_the_command_says(command, expected):
    assert outcome(command) == expected


def test_a_code_mode_command_reads_the_file_it_names():
    assert outcome("Run edit workflow for notes.txt", mode="code") == run("code_edit", path="notes.txt")
    assert outcome("Run code_edit for path=notes.md text=hello world", mode="code") == run(
        "code_edit", path="notes.md", text="hello world"
    )
    assert outcome("Run code_edit workflow", mode="code") == ("needs_more_info", "code_edit", ["path"])


def test_the_run_gets_the_list_the_command_said_and_defaults_for_the_rest():
    decision, _ = read("deploy to eu and us")
    assert decision.args == {"regions": "eu,us"}  # agents.expansion splits it into deploy[0], deploy[1]
    decision, _ = read("Run research workflow for laptops under $1000")
    assert decision.args == {"query": "laptops under $1000"}
    decision, _ = read("Run delete workflow for build")
    assert (decision.args, decision.requires_approval) == ({"target": "build"}, True)
    decision, _ = read("Run hub_and_spoke")
    assert decision.args == {"topic": "laptops under $1000"}


def test_it_says_which_input_is_unclear_and_why():
    decision, _ = read("deploy to eu or us")

    result = decision.result
    assert result.message == "Which regions do you mean: 'eu or us' offers a choice"
    assert [o.would_select for o in result.clarification_options] == ["regions_foreach"]
    assert "NEEDS_CLARIFICATION" in result.to_markdown(1)


def test_a_command_that_names_no_workflow_is_offered_the_catalog():
    decision, _ = read("Get the thing")

    assert [o.would_select for o in decision.result.clarification_options] == ANY
