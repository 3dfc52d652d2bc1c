"""The run page's websocket: replay after a cursor, then live, never twice."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import transaction

from agents.events import Event as RuntimeEvent
from runs.models import Run, Step
from runs.routing import websocket_urlpatterns
from runs.store.unit_of_work import UnitPerEventSink
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

EVENT_ID = re.compile(r'id="event-(\d+)"')


def make_run(user, events: int) -> Run:
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=user)
    emit(run, events)
    return run


def emit(run: Run, count: int) -> None:
    sink = UnitPerEventSink(run.pk)
    for n in range(count):
        with transaction.atomic():
            sink.emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": f"note {n}"}))


def communicator(user, run: Run, after: int) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/?after={after}")
    comm.scope["user"] = user
    return comm


async def received_seqs(comm: WebsocketCommunicator, until: int) -> list[int]:
    seqs: list[int] = []
    while not seqs or seqs[-1] < until:
        seqs += [int(s) for s in EVENT_ID.findall(await comm.receive_from(timeout=5))]
    return seqs


async def test_it_replays_events_after_the_cursor_then_streams_live_ones(owner):
    run = await database_sync_to_async(make_run)(owner, 5)
    comm = communicator(owner, run, after=2)
    connected, _ = await comm.connect()
    assert connected

    assert await received_seqs(comm, until=5) == [3, 4, 5]

    await database_sync_to_async(emit)(run, 2)
    assert await received_seqs(comm, until=7) == [6, 7]
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


def run_with_steps(user, *events: RuntimeEvent) -> Run:
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=user)
    for position, step_id in enumerate(("coordinator", "first", "second")):
        Step.objects.create(run=run, step_id=step_id, agent="sender", position=position)
    sink = UnitPerEventSink(run.pk)
    with transaction.atomic():
        for event in events:
            sink.emit(event)
    return run


async def test_it_sends_the_status_and_the_rows_of_the_steps_an_update_touched(owner):
    run = await database_sync_to_async(run_with_steps)(
        owner,
        RuntimeEvent(
            "agent_turn",
            "first",
            {
                "turn": 1,
                "agent": "a",
                "content": "thinking",
                "tool_calls": [],
                "prompt_tokens": None,
                "completion_tokens": None,
            },
        ),
        RuntimeEvent("coordinator_narration", "coordinator", {"text": "so far so good"}),
    )
    comm = communicator(owner, run, after=0)
    await comm.connect()

    html = await comm.receive_from(timeout=5)
    rows = await comm.receive_from(timeout=5)

    header = re.search(r'<section [^>]*id="run-header"[^>]*>', html)
    assert header and 'hx-swap-oob="true"' in header[0] and f'data-status="{run.status}"' in header[0]
    assert 'id="event-list" hx-swap-oob="beforeend"' in html
    assert 'id="last-seq" data-seq="2"' in html
    # The rows come in a frame of their own that starts with them: the HTML
    # parser drops a <tbody> that follows other elements.
    assert rows.lstrip().startswith("<tbody ")
    assert 'id="step-first" class="step" hx-swap-oob="true"' in rows
    assert 'id="step-coordinator" class="step" hx-swap-oob="true"' in rows
    # Not the rows nothing touched, nor the whole list (400 KB on a 500-step run).
    assert 'id="step-second"' not in html + rows and 'id="step-list"' not in html + rows
    await comm.disconnect()


async def test_it_redraws_a_message_recipients_row_for_its_inbox_count(owner):
    message = {"message_id": "msg-fwd-1", "from": "coordinator", "to": "second", "msg_type": "info", "content": "hi"}
    run = await database_sync_to_async(run_with_steps)(owner, RuntimeEvent("message_sent", "coordinator", message))
    comm = communicator(owner, run, after=0)
    await comm.connect()

    await comm.receive_from(timeout=5)
    rows = await comm.receive_from(timeout=5)

    assert 'id="step-second" class="step" hx-swap-oob="true"' in rows
    await comm.disconnect()


async def test_it_redraws_the_whole_step_list_after_a_run_level_event(owner):
    # A cancel changes every unfinished step and says so in one run-level event.
    run = await database_sync_to_async(run_with_steps)(
        owner, RuntimeEvent("workflow_end", "", {"status": "cancelled", "result": None, "error": "cancelled"})
    )
    comm = communicator(owner, run, after=0)
    await comm.connect()

    html = await comm.receive_from(timeout=5)

    assert 'id="step-list" hx-swap-oob="true"' in html
    assert 'id="step-first" class="step">' in html and 'id="step-second" class="step">' in html
    assert await comm.receive_nothing(timeout=0.3)  # no frame of rows besides
    await comm.disconnect()


async def test_it_sends_nothing_when_the_client_is_up_to_date(owner):
    run = await database_sync_to_async(make_run)(owner, 3)
    comm = communicator(owner, run, after=3)
    connected, _ = await comm.connect()
    assert connected
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()


async def test_it_refuses_a_user_who_may_not_see_the_run(owner, teammate):
    run = await database_sync_to_async(make_run)(owner, 1)
    connected, code = await communicator(teammate, run, after=0).connect()
    assert not connected
    assert code == 4403


async def test_it_lets_staff_watch_any_run(owner, staff):
    run = await database_sync_to_async(make_run)(owner, 2)
    comm = communicator(staff, run, after=0)
    connected, _ = await comm.connect()
    assert connected
    assert await received_seqs(comm, until=2) == [1, 2]
    await comm.disconnect()


async def test_it_delivers_every_event_when_the_channel_layer_drops_them(owner, settings, monkeypatch):
    # channels_redis drops past its capacity with only a log line; here every
    # group message is lost, and the page still ends complete, in order, once.
    from channels.layers import InMemoryChannelLayer

    async def lost(self, group, message):
        return None

    monkeypatch.setattr(InMemoryChannelLayer, "group_send", lost)
    settings.ZENWEB_LIVE_POLL_SECONDS = 0.2
    run = await database_sync_to_async(make_run)(owner, 3)
    comm = communicator(owner, run, after=0)
    assert (await comm.connect())[0]
    assert await received_seqs(comm, until=3) == [1, 2, 3]

    await database_sync_to_async(emit)(run, 40)

    assert await received_seqs(comm, until=43) == list(range(4, 44))
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()
