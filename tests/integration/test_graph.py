"""The run's graph as data: a node per step, loop, worker and child run;
dependencies, spawns and child runs; messages counted per direction from
Message rows, drops with their reasons; loop iterations boxed; escaped
text. runs/static/js/graph.js draws it (tests/browser/test_graph.py)."""

from __future__ import annotations

import json
import re

import pytest
from django.db import transaction
from django.template.loader import render_to_string

from agents.events import Event as RuntimeEvent
from runs import live
from runs.actions import do_create_run
from runs.graph import routing_graph
from runs.graph_shapes import NOWHERE
from runs.models import Message, Run, Step, ToolCall
from runs.store.unit_of_work import UnitPerEventSink
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<script>x</script>"


def card_of(run: Run, **context) -> str:
    return render_to_string("runs/partials/routing_graph.html", {"graph": routing_graph(run)} | context)


def drawn(page: str) -> dict:
    """The graph the card hands runs/static/js/graph.js."""
    return json.loads(re.search(r'<script id="routing-graph-data" type="application/json">(.*?)</script>', page)[1])


def edges_of(data: dict) -> set[tuple[str, str, str]]:
    return {(e["source"], e["target"], e["kind"]) for e in data["edges"]}


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


def test_it_draws_every_step_with_what_it_waits_for(celery_worker):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    graph = routing_graph(run)

    assert [node.id for node in graph.nodes] == ["coordinator", "research", "check_prices", "writer"]
    assert {node.status for node in graph.nodes} == {"completed"}
    assert graph.node("writer").detail == "author"
    assert graph.edge("research", "writer", "depends").title == "writer waits for research"
    assert graph.edge("check_prices", "writer", "depends") is not None
    data = drawn(card_of(run))
    assert [n["id"] for n in data["nodes"]] == ["coordinator", "research", "check_prices", "writer"]
    assert ("check_prices", "writer", "depends") in edges_of(data)


def test_it_counts_messages_sent_and_forwarded_per_direction(celery_worker):
    run = wait_for_run(do_create_run(register("hub_and_spoke"), {}), timeout=60)

    graph = routing_graph(run)

    messages = {(e.source, e.target): e.count for e in graph.edges if e.kind in ("sent", "forward")}
    assert messages == delivered(run)
    assert graph.edge("research", "coordinator", "sent").count == 1
    assert graph.edge("coordinator", "writer", "forward").count == 1
    assert graph.edge("writer", "coordinator", "sent").title == "writer → coordinator: 1 message sent"
    edge = next(e for e in drawn(card_of(run))["edges"] if (e["source"], e["target"]) == ("coordinator", "writer"))
    assert (edge["kind"], edge["count"], edge["label"]) == ("forward", 1, "1")


def test_it_reads_the_graph_in_three_queries(celery_worker, django_assert_num_queries):
    run = wait_for_run(do_create_run(register("relay"), {"subject": "tides"}))

    with django_assert_num_queries(3):  # the steps, the messages, the child runs
        routing_graph(run)


def test_it_draws_drops_as_separate_red_edges_with_their_reasons(celery_worker):
    run = wait_for_run(do_create_run(register("messaging/burst_capped"), {}))

    graph = routing_graph(run)

    sent = graph.edge("chatty", "coordinator", "sent")
    dropped = graph.edge("chatty", "coordinator", "drop")
    assert (sent.count, dropped.count, dropped.reasons) == (1, 1, (("mailbox-full", 1),))
    assert dropped.title == "chatty → coordinator: 1 message dropped: mailbox-full ×1"
    data = drawn(card_of(run))
    drops = [e for e in data["edges"] if e["kind"] == "drop"]
    assert [(e["label"], e["title"]) for e in drops] == [("✕1", dropped.title)]


def test_it_sends_forwards_to_an_unknown_step_to_the_nowhere_node(celery_worker):
    run = wait_for_run(do_create_run(register("misaddressed"), {}))

    graph = routing_graph(run)

    edge = graph.edge("coordinator", NOWHERE, "drop")
    assert (edge.count, edge.reasons, edge.addresses) == (1, (("unknown-step", 1),), (("nobody", 1),))
    assert edge.title == "coordinator → nowhere: 1 message dropped: unknown-step ×1 (to nobody ×1)"
    assert graph.node(NOWHERE).title == "not a step: nobody ×1"
    assert graph.edge("talker", "coordinator", "sent").count == 1


def test_it_draws_workers_spawned_by_the_coordinator_and_their_dependencies(celery_worker):
    run = wait_for_run(do_create_run(register("research_brief"), {}), timeout=60)

    graph = routing_graph(run)

    workers = [node.id for node in graph.nodes if node.kind == "worker"]
    assert workers == ["worker-1", "worker-2", "worker-3"]
    assert all(graph.edge("coordinator", worker, "spawn") for worker in workers)
    assert graph.edge("worker-1", "worker-3", "depends") and graph.edge("worker-2", "worker-3", "depends")
    assert graph.node("worker-3").detail == "worker · writer"


def test_it_boxes_each_loop_iteration_inside_its_loop(celery_worker):
    run = wait_for_run(do_create_run(register("loop_review"), {}), timeout=60)

    graph = routing_graph(run)

    assert graph.node("refine").kind == "loop"
    assert graph.containers == {"refine": "", "refine.0": "refine", "refine.1": "refine"}
    assert graph.node("refine.1.review").container == "refine.1"
    assert graph.node("refine").container == "refine"
    assert graph.edge("refine.1.draft", "refine.1.review", "depends")
    # The loop's row waits for each iteration's last step.
    assert graph.edge("refine.0.review", "refine", "depends") and graph.edge("refine.1.review", "refine", "depends")
    assert graph.edge("refine.0.draft", "refine", "depends") is None
    assert graph.edge("research", "refine.0.draft", "depends") and graph.edge("refine", "publish", "depends")


def test_it_draws_a_child_run_linked_to_its_page_from_the_step_that_started_it():
    run = bare_run()
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator")
    step = Step.objects.create(run=run, step_id="delegate", agent="caller", position=1, status="running")
    call = ToolCall.objects.create(run=run, step=step, tool_call_id="call-1", name="run_workflow", arguments="{}")
    child = bare_run(parent_tool_call=call, status="running")

    graph = routing_graph(run)

    node = graph.node(f"run:{child.pk}")
    assert (node.kind, node.status, node.url) == ("child", "running", f"/runs/{child.pk}/")
    assert node.detail == f"run #{child.pk} · relay"
    assert graph.edge("delegate", f"run:{child.pk}", "child").title == f"delegate started run:{child.pk}"


def test_it_escapes_step_ids_recipients_and_reasons_in_the_card():
    run = bare_run()
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator")
    img = "<img src=x onerror=alert(1)>"
    Step.objects.create(run=run, step_id=img, agent=XSS, position=1)
    message(run, "m1", "coordinator", XSS, drop_reason="unknown-step")
    message(run, "m2", img, "coordinator", drop_reason=XSS)

    page = card_of(run)

    assert "<script>" not in page
    assert "<img" not in page
    assert "</script>x" not in page
    titles = [e["title"] for e in drawn(page)["edges"]]
    assert f"coordinator → nowhere: 1 message dropped: unknown-step ×1 (to {XSS} ×1)" in titles
    assert img in [n["id"] for n in drawn(page)["nodes"]]


def test_it_marks_the_working_step_and_the_busy_coordinator():
    run = bare_run(status=Run.Status.RUNNING, coordinator_busy=True)
    Step.objects.create(run=run, step_id="coordinator", kind="coordinator", agent="coordinator", status="running")
    Step.objects.create(run=run, step_id="first", agent="sender", status="running", position=1)
    Step.objects.create(run=run, step_id="second", agent="receiver", status="failed", position=2)

    graph = routing_graph(run)

    assert [node.id for node in graph.working] == ["coordinator", "first"]
    assert [n["working"] for n in drawn(card_of(run))["nodes"]] == [True, True, False]
    assert graph.node("second").title == "second · receiver · failed"


def test_it_renders_out_of_band_for_live_updates():
    run = bare_run()

    page = card_of(run, oob=True)

    assert page.startswith('<section class="card routing-graph" id="routing-graph" hx-swap-oob="true">')
    assert [n["id"] for n in drawn(page)["nodes"]] == ["coordinator"]


def run_of_three_steps(owner) -> Run:
    run = bare_run(created_by=owner, status="running")
    for position, step_id in enumerate(("coordinator", "first", "second")):
        Step.objects.create(run=run, step_id=step_id, agent="sender", position=position, status="running")
    return run


def emit(run: Run, *events: RuntimeEvent) -> None:
    with transaction.atomic():
        for event in events:
            UnitPerEventSink(run.pk).emit(event)


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
    assert {n["id"]: n["status"] for n in drawn(page)["nodes"]}["first"] == "completed"
    assert hidden.status_code == 404
