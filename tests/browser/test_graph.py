"""The run's graph in a real browser: every catalog workflow's run drawn
with its nodes (coordinator, steps, loop iterations, workers) and edges
(dependencies, spawns, messages, drops) as the server describes them;
labels inside their boxes; a click on a node filters the event stream to
its step (kept in the address) and opens the step; the graph is on the
first screen at 1280x800."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.harness import ROOT, SCREENSHOTS, log_in, wait_until_finished

pytestmark = pytest.mark.browser

# Each catalog workflow, the inputs to start it with, how its run ends, and
# what its graph must hold besides the coordinator.
CATALOG = {
    "hub_and_spoke": ("", "completed", {"depends": {("research", "writer"), ("check_prices", "writer")}}),
    "research_brief": (
        "",
        "completed",
        {
            "spawn": {("coordinator", "worker-1"), ("coordinator", "worker-2"), ("coordinator", "worker-3")},
            "depends": {("worker-1", "worker-3"), ("worker-2", "worker-3")},
        },
    ),
    "loop_review": (
        "",
        "completed",
        {"depends": {("research", "refine.0.draft"), ("refine.1.review", "refine"), ("refine", "publish")}},
    ),
    "regions_foreach": (
        "",
        "completed",
        {"depends": {("deploy[0].ship", "summary"), ("deploy[1].ship", "summary"), ("deploy[2].ship", "summary")}},
    ),
    "research": ("query=laptops", "completed", {}),
    "code_edit": ("path=notes.txt", "completed", {}),  # started in code mode, which it needs
    # Destructive: it waits for an approver's decision, then runs its one step.
    "cleanup_workspace": ("", "completed", {}),
}

SERVER_GRAPH = """
import json
from runs.graph import routing_graph
from runs.models import Run
print(json.dumps(routing_graph(Run.objects.get(pk={run})).data()))
"""

RENDERED = """() => {
  const svg = document.querySelector('#routing-graph svg.routing');
  return {
    nodes: [...svg.querySelectorAll('.rg-node')].map((n) => [n.dataset.node, n.dataset.kind, n.dataset.status]),
    edges: [...svg.querySelectorAll('.rg-edge')].map((e) => [e.dataset.source, e.dataset.target, e.dataset.kind,
                                                             e.dataset.count || null]),
    groups: [...svg.querySelectorAll('.rg-group')].map((g) => g.dataset.group),
  };
}"""

# Every label's box against its node's box, in screen pixels.
OVERFLOWS = """() => [...document.querySelectorAll('#routing-graph .rg-node')].flatMap((node) => {
  const box = node.querySelector('.rg-box').getBoundingClientRect();
  return [...node.querySelectorAll('text')].map((t) => [node.dataset.node, t.textContent, t.getBoundingClientRect()])
    .filter(([, , r]) => r.left < box.left - 0.5 || r.right > box.right + 0.5)
    .map(([id, text, r]) => [id, text, Math.round(r.width), Math.round(box.width)]);
})"""


def start(page, server, workflow: str, inputs: str) -> int:
    page.goto(f"{server.base_url}/")
    select = page.locator("form.start-form select[name=workflow]")
    label = next(t.strip() for t in select.locator("option").all_inner_texts() if t.startswith(workflow + " "))
    select.select_option(label=label)
    page.fill("form.start-form textarea[name=inputs]", inputs)
    page.select_option("form.start-form select[name=mode]", "code" if workflow == "code_edit" else "chat")
    # A destructive workflow starts only with the tick beside what it will do.
    tick = page.locator("form.start-form fieldset.destructive-confirm:not([hidden]) input[name=confirm]")
    if tick.count():
        tick.check()
    page.click("form.start-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))
    return int(re.search(r"/runs/(\d+)/$", page.url)[1])


def approve(open_page, server, run: int) -> None:
    """The approver approves the waiting run on its page (the admin started
    it, and another person must decide)."""
    approver = open_page()
    log_in(approver, server, next_path=f"/runs/{run}/", user="approver")
    form = approver.locator("#run-approvals form.decide")
    form.locator("input[name=reason]").fill("only the build output")
    form.locator("button[value=approve]").click()
    expect(approver.locator("#run-approvals .approval-decided[data-status=approved] .audit")).to_contain_text(
        "approver approved"
    )


def test_the_graph_test_covers_every_catalog_workflow():
    assert sorted(CATALOG) == sorted(path.stem for path in (ROOT / "runs" / "catalog").glob("*.yaml"))


@pytest.mark.parametrize("workflow", list(CATALOG))
def test_every_catalog_workflows_run_is_drawn_with_its_nodes_and_edges(open_page, server, workflow):
    inputs, ends, expected = CATALOG[workflow]
    page = open_page()
    log_in(page, server)
    run = start(page, server, workflow, inputs)
    if workflow == "cleanup_workspace":
        page.wait_for_selector("#run-status[data-status=awaiting_approval]")
        approve(open_page, server, run)
    wait_until_finished(page, expected=ends, timeout_ms=60_000)
    page.reload()  # drawn from the page, not only from live updates
    page.wait_for_selector("#routing-graph svg.routing .rg-node")

    described = json.loads(server.shell(SERVER_GRAPH.format(run=run)))
    rendered = page.evaluate(RENDERED)

    assert sorted(rendered["nodes"]) == sorted([n["id"], n["kind"], n["status"]] for n in described["nodes"])
    want_edges = [
        [e["source"], e["target"], e["kind"], str(e["count"]) if e["label"] else None] for e in described["edges"]
    ]
    assert sorted(rendered["edges"]) == sorted(want_edges)
    assert sorted(rendered["groups"]) == sorted(c["id"] for c in described["containers"])
    kinds = {(s, t, k) for s, t, k, _ in rendered["edges"]}
    for kind, pairs in expected.items():
        assert {(s, t, kind) for s, t in pairs} <= kinds, kind
    assert [n[0] for n in rendered["nodes"] if n[1] == "coordinator"] == ["coordinator"]
    assert page.evaluate(OVERFLOWS) == []
    page.screenshot(path=str(SCREENSHOTS / f"graph-{workflow}.png"))


def test_a_click_on_a_node_shows_its_steps_events_and_opens_the_step(open_page, server):
    page = open_page(viewport={"width": 1280, "height": 800})
    log_in(page, server)
    run = start(page, server, "hub_and_spoke", "")
    wait_until_finished(page, timeout_ms=60_000)

    writer = page.locator('#routing-graph .rg-node[data-node="writer"]')
    # On the first screen, without scrolling.
    box = writer.bounding_box()
    assert box and box["y"] + box["height"] <= 800, box
    writer.click()

    expect(page).to_have_url(re.compile(rf"/runs/{run}/\?step=writer$"))
    expect(page.locator("#event-filters .chip-step input[name=step]")).to_have_count(1)
    page.wait_for_function(
        """() => { const rows = [...document.querySelectorAll('#event-list details.event')];
                   return rows.length && rows.every((r) => r.dataset.step === 'writer'); }"""
    )
    expect(page.locator("#step-writer")).to_have_class(re.compile(r"\bpicked\b"))
    expect(page.locator("#step-writer details[id$=-output]")).to_have_attribute("open", "")
    expect(writer).to_have_class(re.compile(r"\brg-picked\b"))
    # Another node replaces the step chip; a reload keeps the choice.
    page.locator('#routing-graph .rg-node[data-node="research"]').click()
    expect(page).to_have_url(re.compile(rf"/runs/{run}/\?step=research$"))
    page.reload()
    assert page.locator("#event-filters .chip-step input[name=step]").evaluate_all("els => els.map(e => e.value)") == [
        "research"
    ]


LONG_IDS = {
    "nodes": [
        {
            "id": "coordinator",
            "kind": "coordinator",
            "status": "running",
            "detail": "hub",
            "working": True,
            "container": "",
            "url": "",
            "title": "coordinator",
        },
        {
            "id": "deploy[12].ship_to_the_region-with.a_rather_long-name",
            "kind": "step",
            "status": "pending",
            "detail": "shipper",
            "working": False,
            "container": "",
            "url": "",
            "title": "the whole id",
        },
        {
            "id": "supercalifragilisticexpialidocious_and_antidisestablishmentarianism",
            "kind": "step",
            "status": "pending",
            "detail": "x",
            "working": False,
            "container": "",
            "url": "",
            "title": "one long word",
        },
    ],
    "edges": [],
    "containers": [],
}

LINES = """() => [...document.querySelectorAll('#routing-graph .rg-node')].map((n) => ({
  id: n.dataset.node,
  title: n.querySelector('title').textContent,
  lines: [...n.querySelectorAll('.rg-label')].map((t) => t.textContent),
}))"""


def test_long_ids_wrap_after_a_separator_or_are_truncated_never_cut_mid_word(open_page, server):
    page = open_page()
    log_in(page, server)
    page.evaluate(
        """(data) => {
          const card = document.createElement('section');
          card.id = 'routing-graph';
          const json = document.createElement('script');
          json.type = 'application/json'; json.id = 'routing-graph-data'; json.textContent = JSON.stringify(data);
          const canvas = document.createElement('div');
          canvas.className = 'graph-canvas';
          card.append(json, canvas);
          document.querySelector('main').append(card);
          window.zenwebGraph.render(card);
        }""",
        LONG_IDS,
    )

    nodes = {node["id"]: node for node in page.evaluate(LINES)}
    wrapped = nodes["deploy[12].ship_to_the_region-with.a_rather_long-name"]
    assert len(wrapped["lines"]) > 1
    # Every line but the last ends at a separator: no word is cut in two.
    assert all(line[-1] in ".[]_-:/ " for line in wrapped["lines"][:-1]), wrapped["lines"]
    assert "".join(wrapped["lines"]).replace("… ", "").endswith("name")
    word = nodes["supercalifragilisticexpialidocious_and_antidisestablishmentarianism"]
    assert word["lines"][-1].endswith("…") and word["title"] == "one long word"
    assert page.evaluate(OVERFLOWS) == []
