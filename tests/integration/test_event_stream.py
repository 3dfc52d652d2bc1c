"""A run's event stream, a page at a time: keyset paging by seq, filters,
escaping, access."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.events.groups import GROUPS, SEVERITIES
from runs.models import Event, Run, Step
from tests.conftest import register

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
# Every third event is a step's turn, the others tool calls, alternating steps.
TYPES = ["agent_turn", "tool_call", "tool_call"]


def make_run(owner, events: int) -> Run:
    run = Run.objects.create(workflow=register("relay"), created_by=owner, status=Run.Status.RUNNING)
    Step.objects.create(run=run, step_id="first", agent="a", position=1)
    Step.objects.create(run=run, step_id="second", agent="a", position=2)
    Event.objects.bulk_create(
        [
            Event(run=run, seq=seq, type=TYPES[seq % 3], step_id="first" if seq % 2 else "second", data={"n": seq})
            for seq in range(1, events + 1)
        ],
        batch_size=5000,
    )
    Run.objects.filter(pk=run.pk).update(last_event_seq=events)
    return run


def seqs(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<details class="event [^"]*" id="event-(\d+)"', html)]


def get(client, run, headers=None, **params):
    response = client.get(f"/runs/{run.pk}/events/", params, headers=headers)
    assert response.status_code == 200
    return response.content.decode()


@pytest.fixture
def run(owner):
    return make_run(owner, 450)


def test_it_shows_the_newest_page_by_default(client, owner, run):
    client.force_login(owner)

    page = get(client, run)

    assert seqs(page) == list(range(251, 451))
    assert f'hx-get="/runs/{run.pk}/events/?before=251"' in page
    assert "Load newer events" not in page


def test_it_pages_backward_with_before(client, owner, run):
    client.force_login(owner)

    assert seqs(get(client, run, before=251)) == list(range(51, 251))
    last = get(client, run, before=51)
    assert seqs(last) == list(range(1, 51))
    assert "Load older events" not in last
    # A whole page also offers the way back to newer events.
    assert f'hx-get="/runs/{run.pk}/events/?after=50"' in last


def test_it_pages_forward_with_after(client, owner, run):
    client.force_login(owner)

    assert seqs(get(client, run, after=100)) == list(range(101, 301))
    tail = get(client, run, after=300)
    assert seqs(tail) == list(range(301, 451))
    assert "Load newer events" not in tail
    assert seqs(get(client, run, after=450)) == []
    assert seqs(get(client, run, after=100, before=106)) == [101, 102, 103, 104, 105]


def test_an_htmx_page_goes_on_only_the_way_it_was_read(client, owner, run):
    client.force_login(owner)

    older = get(client, run, HTMX, before=251)
    newer = get(client, run, HTMX, after=100)

    assert f'hx-get="/runs/{run.pk}/events/?before=51"' in older
    assert "Load newer events" not in older
    assert f'hx-get="/runs/{run.pk}/events/?after=300"' in newer
    assert "Load older events" not in newer
    for partial in (older, newer):
        assert "<html" not in partial and 'id="event-filters"' not in partial


def test_it_filters_by_types_and_step(client, owner, run):
    client.force_login(owner)

    turns = get(client, run, type="agent_turn")
    assert seqs(turns) == [seq for seq in range(1, 451) if seq % 3 == 0][-200:]
    assert "before=" not in turns

    second_turns = get(client, run, type=["agent_turn", "error"], step="second")
    assert seqs(second_turns) == [seq for seq in range(1, 451) if seq % 6 == 0]

    first = get(client, run, HTMX, step="first", before=400)
    assert seqs(first) == list(range(1, 400, 2))
    assert "Load older events" not in first
    assert seqs(get(client, run, type="no_such_type")) == []
    assert "No events match these filters." in get(client, run, type="no_such_type")


def test_it_says_a_page_past_the_events_is_empty_and_where_they_are(client, owner, run):
    client.force_login(owner)

    before_the_first = get(client, run, before=1)
    past_the_last = get(client, run, after=450)
    more_of_nothing = get(client, run, HTMX, after=450)

    assert seqs(before_the_first) == []
    assert "No events in this range; newer ones are a page away." in before_the_first
    assert "Load newer events" in before_the_first
    assert "No events in this range; older ones are a page away." in past_the_last
    # A "load newer" that finds nothing adds nothing to the list it extends.
    assert "no-events" not in more_of_nothing


def test_the_next_page_keeps_the_filters(client, owner, run):
    client.force_login(owner)

    by_type = get(client, run, HTMX, type=["tool_call", "error"])
    by_step = get(client, run, HTMX, step="first")

    assert seqs(by_type) == [seq for seq in range(1, 451) if seq % 3][-200:]
    assert f'hx-get="/runs/{run.pk}/events/?type=tool_call&amp;type=error&amp;before=151"' in by_type
    assert seqs(by_step) == list(range(51, 451, 2))
    assert f'hx-get="/runs/{run.pk}/events/?step=first&amp;before=51"' in by_step


def test_it_shows_the_data_of_each_event_escaped(client, owner):
    run = make_run(owner, 0)
    Event.objects.create(
        run=run, seq=1, type="coordinator_narration", data={"text": "<script>window.__pwned=1</script>"}
    )
    client.force_login(owner)

    for page in (get(client, run), get(client, run, HTMX)):
        assert "<script>window.__pwned" not in page
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
        details = re.search(r'<details class="event type-coordinator_narration .*?</details>', page, re.S).group(0)
        assert '<pre class="event-data">{\n  &quot;text&quot;: &quot;&lt;script&gt;' in details
        # The whole text, on expand, escaped too.
        assert "<dd>&lt;script&gt;window.__pwned=1&lt;/script&gt;</dd>" in details


def test_its_filter_chips_offer_every_group_and_severity_and_the_runs_steps(client, owner, run):
    client.force_login(owner)

    page = get(client, run, group="tools", severity="error", step="second")

    form = re.search(r'<form id="event-filters".*?</form>', page, re.S).group(0)
    assert f'hx-get="/runs/{run.pk}/events/" hx-target="#event-list"' in form
    for group in GROUPS:
        assert f'name="group" value="{group}"' in form
    for severity in SEVERITIES:
        assert f'name="severity" value="{severity}"' in form
    assert 'name="group" value="tools" checked>' in form
    assert 'name="group" value="messages">' in form
    assert 'name="severity" value="error" checked>' in form
    assert 'name="step" value="second" checked>' in form
    assert '<option value="first">first</option>' in form


def test_it_filters_by_group_and_severity(client, owner):
    run = make_run(owner, 0)
    rows = [
        ("message_sent", {"from": "a", "to": "coordinator", "msg_type": "status", "content": "hi", "message_id": "m1"}),
        ("step_end", {"status": "failed", "output": ""}),
        ("step_end", {"status": "completed", "output": "done"}),
        ("message_dropped", {"from": "a", "to": "b", "msg_type": "x", "reason": "no route", "message_id": "m2"}),
        ("tool_result", {"tool_call_id": "c1", "result": "boom", "status": "failed", "ok": False}),
        ("tool_result", {"tool_call_id": "c2", "result": "ok", "status": "ok", "ok": True}),
    ]
    for seq, (type_, data) in enumerate(rows, start=1):
        Event.objects.create(run=run, seq=seq, type=type_, data=data, step_id="a")
    client.force_login(owner)

    assert seqs(get(client, run, HTMX, severity="error")) == [2, 5]
    assert seqs(get(client, run, HTMX, severity="warning")) == [4]
    assert seqs(get(client, run, HTMX, severity="info")) == [1, 3, 6]
    assert seqs(get(client, run, HTMX, group="messages")) == [1, 4]
    assert seqs(get(client, run, HTMX, group=["tools", "lifecycle"], severity="error")) == [2, 5]
    # The run page itself opens with the filters of its address.
    page = client.get(f"/runs/{run.pk}/", {"severity": "error"}).content.decode()
    assert seqs(page) == [2, 5]
    assert 'name="severity" value="error" checked>' in page
    # Each row carries what the page filters live events by.
    assert 'data-seq="5" data-type="tool_result" data-step="a" data-group="tools" data-severity="error"' in page


def test_it_is_404_for_a_run_the_user_may_not_see(client, owner, teammate, run):
    client.force_login(teammate)

    assert client.get(f"/runs/{run.pk}/events/").status_code == 404
    assert client.get(f"/runs/{run.pk}/events/", headers=HTMX).status_code == 404
    assert client.get("/runs/999999/events/").status_code == 404


def test_staff_may_read_anyones_events(client, staff, run):
    client.force_login(staff)

    assert len(seqs(get(client, run))) == 200


def test_a_page_of_a_big_run_counts_nothing(client, owner):
    run = make_run(owner, 50_000)
    client.force_login(owner)

    for params in ({}, {"before": 25_000}, {"after": 25_000}, {"type": "agent_turn", "before": 30_000}):
        with CaptureQueriesContext(connection) as queries:
            page = get(client, run, HTMX, **params)
        assert len(seqs(page)) == 200
        sql = [query["sql"] for query in queries.captured_queries]
        assert len(sql) <= 6
        assert not any("COUNT(" in statement.upper() for statement in sql)
        assert any("LIMIT 201" in statement for statement in sql)


def test_dashboards_on_the_same_cursor_share_one_rendering_of_an_update(owner):
    from runs.live import render_update

    run = make_run(owner, 12)
    first = render_update(run.pk, 5)
    with CaptureQueriesContext(connection) as queries:
        second = render_update(run.pk, 5)

    assert second == first and first[1] == 12
    assert len(queries) == 0
    # A later event is new work: the next cursor renders it afresh.
    Event.objects.create(run=run, seq=13, type="agent_turn", step_id="first", data={})
    html, last = render_update(run.pk, 12)
    assert last == 13 and 'data-seq="13"' in html


@pytest.mark.parametrize(
    ("type_", "data", "says"),
    [
        # Rows as zenweb stores them: each is read through its type's model.
        (
            "tool_started",
            {"tool_call_id": "c1", "name": "search", "attempt": 2, "worker": "w1:7:MainThread"},
            "search attempt 2 on w1",
        ),
        (
            "tool_result",
            {
                "tool_call_id": "c1",
                "result": "timed out",
                "status": "failed",
                "name": "search",
                "ok": False,
                "error_kind": "timeout",
                "duration_ms": 30,
            },
            "search: timeout",
        ),
        (
            "claim_recorded",
            {"claim_id": 1, "claim": "Aster Swift 14 @ $849", "confidence": 0.9, "url": "https://shop.example.net/p"},
            "Aster Swift 14",
        ),
        (
            "approval_requested",
            {"approval_id": 1, "kind": "tool", "what": "run_shell rm -rf build", "why": "destructive", "arguments": {}},
            "run_shell rm -rf build",
        ),
        (
            "approval_decided",
            {"approval_id": 1, "decision": "approve", "by": "approver", "reason": "ok", "approvals": 1, "required": 1},
            "approve by approver",
        ),
        ("approval_lapsed", {"approval_id": 1, "reason": "step s1 failed"}, "step s1 failed"),
        (
            "notification_failed",
            {"approval_id": 1, "channel": "webhook", "error": "the receiver answered 500", "attempts": 5},
            "the webhook to approvers failed after 5 attempt(s): the receiver answered 500",
        ),
        ("lease_expired", {"owner": "w1", "turn": 3}, "turn 3: the lease of w1 ran out"),
        ("run_stuck", {"reason": "no progress for 600 s"}, "no progress"),
    ],
)
def test_the_stream_says_what_each_governance_and_task_event_means(type_, data, says):
    from runs.models import Event
    from runs.templatetags.zenweb import event_summary

    assert says in event_summary(Event(type=type_, step_id="s1", data=data))


def test_a_row_that_does_not_fit_its_model_says_so_in_the_stream():
    from runs.models import Event
    from runs.templatetags.zenweb import event_summary

    said = event_summary(Event(type="step_end", step_id="s1", data={"status": "completed"}))

    assert said == "step_end event data does not fit StepEnd: output: Field required"


def test_a_row_that_does_not_fit_its_model_keeps_its_data_and_has_no_whole_text(client, owner):
    run = make_run(owner, 0)
    for seq, data in enumerate([{"status": "done", "text": "<b>x</b>"}, {"status": "done", "output": "<b>y</b>"}], 1):
        Event.objects.create(run=run, seq=seq, type="step_end", step_id="first", data=data)
    client.force_login(owner)

    page = get(client, run)
    misfit, fitting = re.findall(r'<details class="event type-step_end .*?</details>', page, re.S)

    assert "does not fit StepEnd" in misfit and "&lt;b&gt;x&lt;/b&gt;" in misfit
    assert "event-full" not in misfit
    assert "<dd>&lt;b&gt;y&lt;/b&gt;</dd>" in fitting
