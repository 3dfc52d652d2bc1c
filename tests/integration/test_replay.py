"""Replaying a run from its event log: step states and message counts at
any seq, the same graph as the live page at the end, and the replay page
(a scrubber over seq, htmx fragments, no JS needed)."""

from __future__ import annotations

import json
import re

import pytest

from runs.actions import do_create_run
from runs.graph import message_traffic, routing_graph
from runs.graph_shapes import NOWHERE
from runs.models import Event, Run
from runs.replay import ReplayState, state_at
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str, user=None, **inputs) -> Run:
    return wait_for_run(do_create_run(register(name), inputs, user=user), timeout=60)


def seq_of(run: Run, type_: str, step_id: str | None = None) -> int:
    events = run.events.filter(type=type_).order_by("seq")
    if step_id is not None:
        events = events.filter(step_id=step_id)
    return events.values_list("seq", flat=True).first()


def final_statuses(run: Run) -> dict[str, str]:
    return dict(run.steps.values_list("step_id", "status"))


def test_it_shows_later_steps_pending_at_an_early_seq(celery_worker):
    run = run_of("relay", subject="tides")

    at_start = state_at(run, seq_of(run, "workflow_start"))
    first_sent = state_at(run, seq_of(run, "message_sent", "first"))
    first_done = state_at(run, seq_of(run, "step_end", "first"))

    assert at_start.statuses == {"coordinator": "running", "first": "pending", "second": "pending"}
    assert at_start.run_status == "running"
    assert first_sent.statuses == {"coordinator": "running", "first": "running", "second": "pending"}
    assert first_sent.traffic == {("first", "coordinator", ""): 1}
    assert [event.seq for event in first_sent.events] == list(range(1, first_sent.seq + 1))
    graph = first_sent.graph
    assert (graph.node("first").status, graph.node("second").status) == ("running", "pending")
    assert graph.node("first").working
    assert graph.edge("first", "coordinator", "sent").count == 1
    assert graph.edge("second", "coordinator", "sent") is None
    # second depends on first: it cannot have started before first ended.
    assert first_done.statuses["first"] == "completed"
    assert first_done.statuses["second"] == "pending"


def test_it_shows_the_coordinator_working_between_wake_and_idle(celery_worker):
    run = run_of("relay", subject="tides")
    wake = seq_of(run, "agent_wake", "coordinator")
    idle = run.events.filter(type="agent_idle", step_id="coordinator", seq__gt=wake).order_by("seq").first().seq

    assert not state_at(run, wake - 1).coordinator_working
    assert state_at(run, wake).graph.node("coordinator").working
    assert state_at(run, idle - 1).coordinator_working
    assert not state_at(run, idle).coordinator_working


@pytest.mark.parametrize(
    "name",
    [
        "relay",
        "misaddressed",
        "messaging/policy_abort",
        "messaging/resume",
        "containers_run/judge_no",
        "containers_run/each_relay",
        "tools/planned",
        "tools/fixup",
        "tools/fixup_after_failure",
    ],
)
def test_it_matches_the_final_steps_and_messages_at_the_last_seq(celery_worker, name):
    run = run_of(name, **({"subject": "tides"} if name == "relay" else {}))

    state = state_at(run)

    assert state.seq == run.last_event_seq
    assert state.statuses == final_statuses(run)
    assert state.run_status == run.status
    assert {key: n for key, n in state.traffic.items() if n} == message_traffic(run)
    replayed, live = state.graph, routing_graph(run)
    assert replayed.data() == live.data()
    assert replayed.edges == live.edges


def test_it_replays_drops_to_the_nowhere_node(celery_worker):
    run = run_of("misaddressed")

    edge = state_at(run).graph.edge("coordinator", NOWHERE, "drop")

    assert (edge.count, edge.reasons, edge.addresses) == (1, (("unknown-step", 1),), (("nobody", 1),))


def test_it_moves_a_stored_message_dropped_later_from_delivered_to_dropped():
    state = ReplayState(run_id=0)
    # Rows as zenweb stores them: replay reads each through its type's model.
    message = {"from": "coordinator", "to": "slow", "msg_type": "info", "message_id": "msg-fwd-1"}
    start = {"workflow": "w", "version": 1, "inputs": {}, "steps": ["slow"]}
    state.apply(Event(seq=1, type="workflow_start", data=start))
    state.apply(Event(seq=2, type="message_sent", step_id="coordinator", data=message | {"content": "hurry"}))
    assert state.traffic[("coordinator", "slow", "")] == 1

    dropped = message | {"reason": "target-terminal"}
    state.apply(Event(seq=3, type="message_dropped", step_id="coordinator", data=dropped))
    state.apply(Event(seq=4, type="workflow_end", data={"status": "cancelled", "result": None, "error": ""}))

    assert +state.traffic == {("coordinator", "slow", "target-terminal"): 1}
    assert state.statuses == {"coordinator": "cancelled", "slow": "cancelled"}


def test_it_renders_the_replay_page_at_a_seq(celery_worker, client, owner):
    run = run_of("relay", owner, subject="tides")
    seq = seq_of(run, "step_start", "first")
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/replay/?seq={seq}").content.decode()

    assert "<html" in page
    assert f"at event #{seq} of {run.last_event_seq}" in page
    assert f'<input type="range" name="seq" min="1" max="{run.last_event_seq}" value="{seq}"' in page
    assert 'hx-trigger="input changed delay:150ms" hx-target="#routing-graph"' in page
    # Without JS: links to the neighbours and a form GET with the number.
    assert f'href="?seq={seq - 1}" rel="prev"' in page
    assert f'href="?seq={seq + 1}" rel="next"' in page
    assert f'<input type="number" name="seq" min="1" max="{run.last_event_seq}" value="{seq}">' in page
    assert '<tr id="replay-step-second"' in page
    # second is pending, in the graph and in the table; the run, the
    # coordinator and first are running.
    assert page.count('data-status="pending"') == 1
    assert page.count('data-status="running"') == 3
    graph = json.loads(re.search(r'<script id="routing-graph-data" type="application/json">(.*?)</script>', page)[1])
    assert {node["id"]: node["status"] for node in graph["nodes"]} == {
        "coordinator": "running",
        "first": "running",
        "second": "pending",
    }


def test_it_clamps_a_seq_before_the_first_event_and_names_pending_steps_agents(celery_worker, client, owner):
    run = run_of("relay", owner, subject="tides")
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/replay/?seq=0").content.decode()
    at_start = state_at(run, seq_of(run, "workflow_start"))
    start_page = client.get(f"/runs/{run.pk}/replay/?seq={at_start.seq}").content.decode()

    assert f"at event #1 of {run.last_event_seq}" in page
    assert f'min="1" max="{run.last_event_seq}" value="1"' in page
    assert 'value="0"' not in page
    agents = dict(run.steps.exclude(step_id="coordinator").values_list("step_id", "agent"))
    assert {step.step_id: step.agent for step in at_start.steps.values()} == agents
    assert all(at_start.steps[step_id].status == "pending" for step_id in ("first", "second"))
    # No event has named the agent of a step that has not started: the row shows it all the same.
    for step_id, agent in agents.items():
        row = re.search(rf'<tr id="replay-step-{step_id}" .*?</tr>', start_page, re.S)[0]
        assert f"<td>{agent}</td>" in row and 'data-status="pending"' in row and "—" not in row


def test_it_defaults_to_the_last_seq(celery_worker, client, owner):
    run = run_of("relay", owner, subject="tides")
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/replay/").content.decode()

    assert f"at event #{run.last_event_seq} of {run.last_event_seq}" in page
    assert 'rel="next"' not in page
    assert "workflow_end" in page


def test_it_returns_only_the_graph_to_htmx(celery_worker, client, owner):
    run = run_of("relay", owner, subject="tides")
    client.force_login(owner)

    response = client.get(f"/runs/{run.pk}/replay/?seq=3", headers={"HX-Request": "true"})
    page = response.content.decode()

    assert page.startswith('<section class="card routing-graph" id="routing-graph">')
    assert "<html" not in page and 'type="range"' not in page
    assert "at event #3 of" in page
    assert "HX-Request" in response["Vary"]


def test_it_hides_another_users_run(celery_worker, client, owner, teammate):
    run = run_of("relay", owner, subject="tides")
    client.force_login(teammate)

    assert client.get(f"/runs/{run.pk}/replay/").status_code == 404
    assert client.get(f"/runs/{run.pk}/replay/", headers={"HX-Request": "true"}).status_code == 404
