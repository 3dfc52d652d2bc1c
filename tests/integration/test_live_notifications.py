"""The run page's websocket under a stream of notifications: it takes them
while a render holds the database thread, answers many with one update,
and never trusts a read that began before the event it heard of."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from runs import live
from tests.integration.test_websocket import communicator, emit, make_run, received_seqs

pytestmark = pytest.mark.django_db(transaction=True)


def own_thread(func):
    # Not the one thread that channels runs database work on: that one is
    # held on purpose here.
    return sync_to_async(func, thread_sensitive=False)


async def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_it_takes_notifications_while_a_render_holds_the_database_thread(owner, settings, monkeypatch):
    settings.ZENWEB_LIVE_POLL_SECONDS = 30  # only notifications can deliver here
    run = await database_sync_to_async(make_run)(owner, 3)
    comm = communicator(owner, run, after=0)
    assert (await comm.connect())[0]
    assert await received_seqs(comm, until=3) == [1, 2, 3]

    render = live.render_update
    gate, held, afters = threading.Event(), threading.Event(), []

    def slow_render(run_id: int, after: int) -> tuple[str, int]:
        afters.append(after)
        held.set()
        gate.wait(10)
        return render(run_id, after)

    monkeypatch.setattr(live, "render_update", slow_render)
    await own_thread(emit)(run, 1)
    await until(held.is_set)
    # The consumer's render holds the database thread while 36 more commits
    # notify it: each notification is taken at once, none waits behind it.
    await own_thread(emit)(run, 36)
    layer = get_channel_layer()
    await until(lambda: all(queue.empty() for queue in layer.channels.values()))
    gate.set()

    assert await received_seqs(comm, until=40) == list(range(4, 41))
    assert await comm.receive_nothing(timeout=0.3)
    # A handful of reads for 37 notifications: the held one, then what
    # committed while it was held.
    assert len(afters) <= 4
    await comm.disconnect()


async def test_it_does_not_trust_a_read_that_began_before_the_notified_commit(owner, settings, monkeypatch):
    settings.ZENWEB_LIVE_POLL_SECONDS = 30
    run = await database_sync_to_async(make_run)(owner, 2)
    comm = communicator(owner, run, after=0)
    assert (await comm.connect())[0]
    assert await received_seqs(comm, until=2) == [1, 2]

    async def read_from_before_the_commit(run_id: int, after: int) -> tuple[str, int]:
        return "", after

    monkeypatch.setattr(live, "shared_update", read_from_before_the_commit)
    await database_sync_to_async(emit)(run, 3)

    assert await received_seqs(comm, until=5) == [3, 4, 5]
    await comm.disconnect()


async def test_it_closes_a_page_whose_updates_fail_so_that_it_reconnects(owner, monkeypatch):
    run = await database_sync_to_async(make_run)(owner, 1)

    async def database_away(run_id: int, after: int) -> tuple[str, int]:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(live, "shared_update", database_away)
    comm = communicator(owner, run, after=0)
    assert (await comm.connect())[0]

    closed = await comm.receive_output(timeout=5)

    # 4503, which the page reconnects after (runs/static/js/live.js): daphne refuses 1011.
    assert closed == {"type": "websocket.close", "code": 4503}
    await comm.disconnect()


async def test_it_shares_one_rendering_between_dashboards_asking_for_the_same_update(monkeypatch):
    calls = []

    def render(run_id: int, after: int) -> tuple[str, int]:
        calls.append((run_id, after))
        time.sleep(0.05)
        return f"<update {after}>", after + 5

    monkeypatch.setattr(live, "render_update", render)

    updates = await asyncio.gather(*(live.shared_update(7, 10) for _ in range(20)))

    assert updates == [("<update 10>", 15)] * 20
    assert calls == [(7, 10)]
    assert await live.shared_update(7, 15) == ("<update 15>", 20)
    assert calls == [(7, 10), (7, 15)]


def test_it_logs_a_notification_the_channel_layer_refused(caplog, monkeypatch):
    from runs.store import events as stores

    class Away:
        async def group_send(self, group, message):
            raise ConnectionError("Redis is away")

    monkeypatch.setattr(stores, "get_channel_layer", Away)

    stores.broadcast(7, 42)  # returns at once: the publish is not waited for

    deadline = time.monotonic() + 5
    while "event 42 of run 7: Redis is away" not in caplog.text:
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.01)


def test_it_publishes_pending_notifications_before_the_process_exits(monkeypatch):
    from runs.store import events as stores

    published = []

    class Slow:
        async def group_send(self, group, message):
            await asyncio.sleep(0.3)
            published.append((group, message["seq"]))

    monkeypatch.setattr(stores, "get_channel_layer", Slow)
    stores.broadcast(7, 42)
    assert published == []  # not waited for

    stores._flush_broadcasts()  # what atexit runs

    assert published == [("run-7", 42)]


def test_it_wakes_a_dashboard_that_waits_on_another_threads_loop():
    # Embedded, worker threads broadcast from an event loop of their own to
    # the queues daphne's loop waits on. channels' in-memory layer handed
    # the message over without waking that loop: the dashboard heard of it
    # only when something else woke the loop (here: never).
    from runs.channel_layers import InMemoryChannelLayer

    layer = InMemoryChannelLayer()
    got: list[dict] = []
    dashboard_loop = asyncio.new_event_loop()

    async def dashboard() -> None:
        got.append(await layer.receive("specific.dashboard"))

    waiting = threading.Thread(target=dashboard_loop.run_until_complete, args=(dashboard(),), daemon=True)
    waiting.start()
    deadline = time.monotonic() + 5
    while "specific.dashboard" not in layer.channels and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # receive() is waiting on its queue now

    asyncio.run(layer.send("specific.dashboard", {"type": "run.event", "seq": 1}))
    waiting.join(timeout=5)  # only a lost wake-up takes this long

    assert got == [{"type": "run.event", "seq": 1}]


def test_it_tells_only_runs_somebody_watches_in_this_process(monkeypatch):
    # Embedded, a broadcast goes through the broadcast loop's thread; for a
    # run no dashboard of this process watches, it is not sent at all (a
    # dashboard opened later reads every event from the database).
    from asgiref.sync import async_to_sync

    from runs.channel_layers import InMemoryChannelLayer
    from runs.store import events as stores

    layer = InMemoryChannelLayer()
    monkeypatch.setattr(stores, "get_channel_layer", lambda: layer)
    async_to_sync(layer.group_add)("run-8", "specific.dashboard")
    sent = []
    group_send = layer.group_send

    async def counted(group, message):
        sent.append(group)
        await group_send(group, message)

    monkeypatch.setattr(layer, "group_send", counted)

    stores.broadcast(7, 42)
    stores.broadcast(8, 43)
    stores._flush_broadcasts()

    assert sent == ["run-8"]
    assert async_to_sync(layer.receive)("specific.dashboard") == {"type": "run.event", "seq": 43}


def test_a_burst_of_notifications_reaches_the_pages_as_its_first_and_its_newest(monkeypatch):
    # A chain's steps end a millisecond or two apart: each notification cost
    # the worker a trip to Redis and every open page a database read. The
    # first of a burst goes at once; the rest are held back to the end of the
    # interval, where the newest stands for them all (pages read every event
    # after their cursor); a run's next notification after a quiet spell
    # goes at once again.
    from runs.store import events as stores

    published: list[tuple[str, int, float]] = []

    class Recording:
        async def group_send(self, group, message):
            published.append((group, message["seq"], time.monotonic()))

    monkeypatch.setattr(stores, "get_channel_layer", Recording)
    monkeypatch.setattr(stores, "_throttle", stores._Throttle())
    started = time.monotonic()
    for seq in range(1, 51):
        stores.broadcast(7, seq)
    burst = time.monotonic() - started  # a loaded machine may spread it over intervals
    stores.broadcast(8, 1)  # another run's is not held back by run 7's

    deadline = time.monotonic() + 5
    while [seq for group, seq, _ in published if group == "run-7"][-1:] != [50]:
        assert time.monotonic() < deadline, published
        time.sleep(0.005)
    seqs = [seq for group, seq, _ in published if group == "run-7"]
    assert seqs[0] == 1 and seqs == sorted(seqs), seqs
    assert len(seqs) <= 2 + int(burst / stores.NOTICE_SECONDS), seqs  # [1, 50] unless the burst was slow
    assert ("run-8", 1) in [(group, seq) for group, seq, _ in published]
    newest_at = published[[seq for _, seq, _ in published].index(50)][2]
    assert newest_at - started >= stores.NOTICE_SECONDS * 0.9  # held to the interval's end

    time.sleep(stores.NOTICE_SECONDS * 2)
    published.clear()
    stores.broadcast(7, 51)
    deadline = time.monotonic() + 5
    while not published:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert [seq for _, seq, _ in published] == [51]


def test_a_notification_held_back_goes_out_before_the_process_exits(monkeypatch):
    # A process that exits within an interval of its last notification (a
    # management command, a benchmark's writer) sends the one it held back:
    # else the page would learn of its last events only at its next poll.
    from runs.store import events as stores

    published = []

    class Recording:
        async def group_send(self, group, message):
            published.append((group, message["seq"]))

    monkeypatch.setattr(stores, "get_channel_layer", Recording)
    monkeypatch.setattr(stores, "NOTICE_SECONDS", 60.0)  # nothing held back goes out by itself here
    monkeypatch.setattr(stores, "_throttle", stores._Throttle())
    stores.broadcast(9, 1)
    stores.broadcast(9, 2)  # held back: the interval has not ended

    stores._flush_broadcasts()  # what atexit runs

    assert published == [("run-9", 1), ("run-9", 2)]
