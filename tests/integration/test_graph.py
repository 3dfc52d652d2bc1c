"""The routing graph: a node per step around the coordinator, an edge per
direction counted from Message rows, drops as red edges with their reasons,
escaped text, and a layout that holds fifty steps."""

from __future__ import annotations

import itertools
import math
import re

import pytest
from django.db import transaction
from django.template.loader import render_to_string

from agents.events import Event as RuntimeEvent
from runs import live
from runs.actions import do_create_run
from runs.graph import routing_graph
from runs.graph_shapes import NOWHERE
from runs.models import Message, Run, Step
from runs.store.events import DjangoEventSink
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<script>x</script>"


def svg_of(run: Run) -> str:
    return render_to_string("runs/partials/routing_graph.html", {"graph": routing_graph(run)})


def delivered(run: Run) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for sender, recipient in Message.objects.filter(run=run, drop_reason="").values_list("sender", "recipient"):
        counts[(sender, recipient)] = counts.get((sender, recipient), 0) + 1
    return counts


def message(run: Run, message_id: str, sender: str, recipient: str, drop_reason: str = "") -> Message:
    return Message.objects.create(
        run=run, message_id=message_id, sender=sender, recipient=recipient, type="info", drop_reason=drop_reason
    )


def bare_run(**fields) -> Run:
    return Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, **fields)


def test_it_draws_a_node_per_step_around_the_coordinator(celery_worker):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    graph = routing_graph(run)

    assert [node.id for node in graph.nodes] == ["coordinator", "research", "check_prices", "writer"]
    hub = graph.node("coordinator")
    assert (hub.x, hub.y) == (graph.size / 2, graph.size / 2)
    radii = {round(math.dist((node.x, node.y), (hub.x, hub.y))) for node in graph.nodes[1:]}
    assert len(radii) == 1
    assert {node.status for node in graph.nodes} == {"completed"}
    assert graph.node("writer").agent == "author"
    page = svg_of(run)
    for node_id in ("coordinator", "research", "check_prices", "writer"):
        assert f'data-node="{node_id}"' in page


def test_it_counts_delivered_messages_per_direction(celery_worker):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    graph = routing_graph(run)

    assert {(e.source, e.target): e.count for e in graph.edges if not e.dropped} == delivered(run)
    assert graph.edge("research", "coordinator").count == 1
    assert graph.edge("coordinator", "writer").count == 1
    assert graph.edge("writer", "coordinator").count == 1
    assert 'data-source="coordinator" data-target="writer" data-count="1"' in svg_of(run)


def test_it_reads_the_graph_in_two_queries(celery_worker, django_assert_num_queries):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tides"}))

    with django_assert_num_queries(2):
        routing_graph(run)


def test_it_draws_drops_as_separate_red_edges_with_their_reasons(celery_worker):
    run = wait_for_run(do_create_run(register("messaging/burst_capped"), {}))

    graph = routing_graph(run)

    sent = graph.edge("chatty", "coordinator")
    dropped = graph.edge("chatty", "coordinator", dropped=True)
    assert (sent.count, dropped.count, dropped.reasons) == (1, 1, (("mailbox-full", 1),))
    assert dropped.title == "chatty → coordinator: 1 message dropped: mailbox-full ×1"
    page = svg_of(run)
    assert page.count('data-dropped="true"') == 1
    assert 'stroke-dasharray="5 4" marker-end="url(#rg-arrow-drop)"' in page
    assert "<title>chatty → coordinator: 1 message dropped: mailbox-full ×1</title>" in page
    assert ">✕1</text>" in page


def test_it_sends_forwards_to_an_unknown_step_to_the_nowhere_node(celery_worker):
    run = wait_for_run(do_create_run(register("misaddressed"), {}))

    graph = routing_graph(run)

    edge = graph.edge("coordinator", NOWHERE, dropped=True)
    assert (edge.count, edge.reasons, edge.addresses) == (1, (("unknown-step", 1),), (("nobody", 1),))
    assert edge.title == "coordinator → nowhere: 1 message dropped: unknown-step ×1 (to nobody ×1)"
    nowhere = graph.node(NOWHERE)
    assert nowhere.title == "not a step: nobody ×1"
    assert 0 < nowhere.x < graph.size and 0 < nowhere.y < graph.size
    assert graph.edge("talker", "coordinator").count == 1


def test_it_escapes_step_ids_recipients_and_reasons_in_the_svg():
    run = bare_run()
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator")
    img = "<img src=x onerror=alert(1)>"
    Step.objects.create(run=run, step_id=img, agent=XSS, position=1)
    message(run, "m1", "coordinator", XSS, drop_reason="unknown-step")
    message(run, "m2", img, "coordinator", drop_reason=XSS)

    page = svg_of(run)

    assert "<script>" not in page
    assert "<img" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "unknown-step ×1 (to &lt;script&gt;x&lt;/script&gt; ×1)" in page
    assert "1 message dropped: &lt;script&gt;x&lt;/script&gt; ×1</title>" in page
    assert 'data-node="&lt;img src=x onerror=alert(1)&gt;"' in page


def test_it_marks_the_working_step_and_the_busy_coordinator():
    run = bare_run(status=Run.Status.RUNNING, coordinator_busy=True)
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    Step.objects.create(run=run, step_id="first", agent="sender", status="running", position=1)
    Step.objects.create(run=run, step_id="second", agent="receiver", status="failed", position=2)

    graph = routing_graph(run)
    page = svg_of(run)

    assert [node.id for node in graph.working] == ["coordinator", "first"]
    assert page.count(' rg-working"') == 2
    assert page.count(">working</text>") == 2
    assert ">✕</text>" in page and ">◐</text>" in page
    assert graph.node("second").title == "second · agent receiver · failed"


def test_it_keeps_container_steps_together_under_their_container():
    run = bare_run()
    rows = ["intro", "refine", "refine.0.draft", "deploy[0].ship", "deploy[1].ship", "outro", "refine.1.draft"]
    for position, step_id in enumerate(rows):
        Step.objects.create(run=run, step_id=step_id, kind="loop" if step_id == "refine" else "step", position=position)

    graph = routing_graph(run)

    assert [node.id for node in graph.nodes[1:]] == [
        "intro",
        "refine",
        "refine.0.draft",
        "refine.1.draft",
        "deploy[0].ship",
        "deploy[1].ship",
        "outro",
    ]
    assert [(group.id, len(group.arcs)) for group in graph.groups] == [("refine", 1), ("deploy", 1)]
    assert {node.id: node.group for node in graph.nodes}["refine.1.draft"] == "refine"
    assert '<rect x="' in svg_of(run)  # the loop's own row is a square


def test_it_lays_out_fifty_steps_inside_the_viewbox_without_overlap():
    run = bare_run()
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator")
    ids = [f"a-rather-long-step-name-{n}" for n in range(30)] + [f"fan[{n}].work" for n in range(20)]
    for position, step_id in enumerate(ids, start=1):
        Step.objects.create(run=run, step_id=step_id, agent="worker", position=position)
    for n in range(50):
        message(run, f"m{n}", ids[n], "coordinator")

    page = svg_of(run)

    width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', page).groups())
    circles = [tuple(map(float, c)) for c in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"', page)]
    assert len(circles) == 51
    for x, y, r in circles:
        assert r <= x <= width - r and r <= y <= height - r
    for (x1, y1, r1), (x2, y2, r2) in itertools.combinations(circles, 2):
        assert math.dist((x1, y1), (x2, y2)) > r1 + r2
    # Labels are cut short; the full id is in the node's title.
    assert ">a-rather-l…</text>" in page
    assert "<title>a-rather-long-step-name-7 · agent worker · pending</title>" in page
    assert page.count('data-count="1"') == 50


def test_it_renders_out_of_band_for_live_updates():
    run = bare_run()

    page = render_to_string("runs/partials/routing_graph.html", {"graph": routing_graph(run), "oob": True})

    assert page.startswith('<section class="card routing-graph" id="routing-graph" hx-swap-oob="true">')
    assert 'data-node="coordinator"' in page


def run_of_three_steps(owner) -> Run:
    run = bare_run(created_by=owner, status="running")
    for position, step_id in enumerate(("coordinator", "first", "second")):
        Step.objects.create(run=run, step_id=step_id, agent="sender", position=position, status="running")
    return run


def emit(run: Run, *events: RuntimeEvent) -> None:
    with transaction.atomic():
        for event in events:
            DjangoEventSink(run.pk).emit(event)


def test_it_marks_a_big_runs_graph_stale_instead_of_sending_it(owner, settings):
    settings.ZENWEB_LIVE_GRAPH_STEPS = 2  # three steps make this run big
    run = run_of_three_steps(owner)
    emit(run, RuntimeEvent("step_end", "first", {"status": "completed", "output": "done"}))

    html, last = live.render_update(run.pk, 0)

    assert 'id="routing-graph"' not in html
    assert f'<span id="graph-stale" data-seq="{last}" hidden hx-swap-oob="true"></span>' in html
    # The update that ends the run draws it: the page's last graph is not left stale.
    emit(run, RuntimeEvent("workflow_end", "", {"status": "completed", "result": "ok", "error": ""}))
    html, last = live.render_update(run.pk, last)
    assert f'id="routing-graph" hx-swap-oob="true" data-seq="{last}"' in html
    assert 'id="graph-stale"' not in html


def test_it_sends_a_small_runs_graph_with_each_update_that_changes_it(owner, settings):
    settings.ZENWEB_LIVE_GRAPH_STEPS = 60
    run = run_of_three_steps(owner)
    emit(run, RuntimeEvent("step_end", "first", {"status": "completed", "output": "done"}))

    html, last = live.render_update(run.pk, 0)

    graph = f'id="routing-graph" hx-swap-oob="true" data-seq="{last}" hx-get="/runs/{run.pk}/graph/"'
    assert graph in html and 'id="graph-stale"' not in html


def test_it_serves_a_stale_graph_to_those_who_may_see_the_run(owner, teammate, client):
    run = run_of_three_steps(owner)
    emit(run, RuntimeEvent("step_end", "first", {"status": "completed", "output": "done"}))
    Step.objects.filter(run=run, step_id="first").update(status="completed")

    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/graph/").content.decode()
    client.force_login(teammate)
    hidden = client.get(f"/runs/{run.pk}/graph/")

    # Polled again only while the page's stale mark is newer than data-seq.
    assert page.startswith(
        f'<section class="card routing-graph" id="routing-graph" data-seq="1" hx-get="/runs/{run.pk}/graph/" '
        'hx-trigger="graph-stale" hx-swap="outerHTML">'
    )
    assert 'data-node="first" data-status="completed"' in page
    assert hidden.status_code == 404
