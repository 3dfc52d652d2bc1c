"""The run's graph in the browser: how long runs/static/js/graph.js takes to lay
out (dagre) and draw a graph of 500 nodes in Debian's chromium.

The graph's data comes from runs.graph.graph_of in a child process (Django
set up): the coordinator and 499 nodes, 300 steps in ten layers where each
waits for one of the layer before, 100 workers the coordinator spawned, 99
forEach iterations each in its box, and messages from every step to the
coordinator (some dropped). The page holds the card as the run page does
(the JSON, the canvas, the stylesheet, dagre and graph.js); the time is
``zenwebGraph.render(card)``, measured in the page with performance.now().
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import ROOT, Context, Result, Target, run_child, skipped

CHROMIUM = "/usr/bin/chromium"
NODES = 500
RENDERS = 7
TARGET = Target("<", 1000, "< 1 s")
NAME = f"graph of {NODES} nodes rendered in the browser"


def graph_data() -> dict[str, Any]:
    """In a child process: the data of a 500-node graph, as the card embeds it."""
    from runs.graph import graph_of
    from runs.graph_shapes import GraphStep

    steps = []
    for layer in range(10):
        for n in range(30):
            deps = (f"layer{layer - 1}-{(n * 7) % 30}",) if layer else ()
            steps.append(GraphStep(f"layer{layer}-{n}", "worker", "completed", depends_on=deps))
    steps += [GraphStep(f"worker-{n}", "analyst", "running", spawned_by=f"call-{n}") for n in range(100)]
    steps += [GraphStep(f"deploy[{n}].ship", "shipper", "pending", container=f"deploy[{n}]") for n in range(99)]
    traffic = {(step.id, "coordinator", ""): 2 for step in steps}
    traffic |= {(step.id, "coordinator", "mailbox-full"): 1 for step in steps[::25]}
    return graph_of("running", True, steps, traffic).data()


PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}</style></head><body><main>
<section class="card routing-graph" id="routing-graph">
<script id="routing-graph-data" type="application/json">{data}</script>
<div class="graph-canvas" data-clickable="true"></div></section></main></body></html>"""

RENDER = """() => {
  const card = document.getElementById('routing-graph');
  const started = performance.now();
  const svg = window.zenwebGraph.render(card);
  const ms = performance.now() - started;
  return [ms, svg.querySelectorAll('.rg-node').length, svg.querySelectorAll('.rg-edge').length];
}"""


def measure(ctx: Context) -> list[Result]:
    if not Path(CHROMIUM).exists():
        return [skipped("graph_render", NAME, "chromium", "ms", f"{CHROMIUM} not found", target=TARGET)]
    from playwright.sync_api import sync_playwright

    data = run_child("bench.graph_render", "graph_data", ctx.sqlite().env)
    # Inside a <script>: no "</" may end it early (Django's json_script escapes the same way).
    text = json.dumps(data).replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    css = (ROOT / "runs/static/css/zenweb.css").read_text()
    timings: list[float] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_content(PAGE.format(css=css, data=text))
            page.add_script_tag(path=str(ROOT / "runs/static/vendor/dagre/dagre.min.js"))
            page.add_script_tag(path=str(ROOT / "runs/static/js/graph.js"))
            page.evaluate(RENDER)  # warm-up: the scripts compiled
            for _ in range(RENDERS):
                ms, nodes, edges = page.evaluate(RENDER)
                timings.append(ms)
        finally:
            browser.close()
    note = f"{nodes} nodes, {edges} edges drawn; dagre {_dagre_version()}"
    return [Result("graph_render", NAME, "chromium", "ms", timings, higher_is_better=False, target=TARGET, note=note)]


def _dagre_version() -> str:
    readme = (ROOT / "runs/static/vendor/dagre/README.md").read_text()
    return readme.splitlines()[0].removeprefix("# dagre ").strip()
