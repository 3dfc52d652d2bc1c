"""Events: the notices that tell open dashboards a new one exists, sent
after commit (the sinks that write events are the unit of work's:
runs/store/unit_of_work.py)."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import threading
import time

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from runs.channel_layers import InMemoryChannelLayer

log = logging.getLogger(__name__)


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


def broadcast(run_id: int, seq: int) -> None:
    """Tell open dashboards that event ``seq`` exists. Only the number travels:
    consumers read the event itself from the database, so a lost notification
    costs a little latency, never an event; and the newest stands for every
    one before it, so a run's notifications go at most one per
    NOTICE_SECONDS (``_Throttle``)."""
    send_to_dashboards(run_id, _notice(seq), f"event {seq}", throttled=True)


def _notice(seq: int) -> dict:
    return {"type": "run.event", "seq": seq}


def send_to_dashboards(run_id: int, message: dict, what: str, *, throttled: bool = False) -> None:
    """Send ``message`` to the run's group (its open pages), without waiting;
    ``what`` names it in the warning logged if it cannot be sent.
    ``throttled``: a ``run.event`` notification, held back if the run's
    last one went less than NOTICE_SECONDS ago (see ``_Throttle``)."""
    group = run_group(run_id)
    layer = get_channel_layer()
    if layer is None or (isinstance(layer, InMemoryChannelLayer) and not layer.listening(group)):
        # Nobody to tell: a dashboard that opens later reads every event
        # from the database once it has joined the group (runs/consumers.py).
        return
    try:
        if _in_sync_to_async_thread():
            # Back to the loop that runs this thread, as async_to_sync does.
            async_to_sync(layer.group_send)(group, message)
            return
        loop = _broadcast_loop()
        if throttled:
            delay = _throttle.hold(run_id, message["seq"], time.monotonic())
            if delay is not None:
                if delay > 0:  # the first held back this interval: sent when it ends
                    loop.call_soon_threadsafe(loop.call_later, delay, _send_held, run_id)
                return
        _send_from_loop(loop, run_id, message, what)
    except Exception as exc:  # noqa: BLE001 - Redis away: the consumers' poll still finds the event
        log.warning("could not notify dashboards of %s of run %s: %s", what, run_id, exc)


def _send_from_loop(loop: asyncio.AbstractEventLoop, run_id: int, message: dict, what: str) -> None:
    layer = get_channel_layer()
    sent = asyncio.run_coroutine_threadsafe(layer.group_send(run_group(run_id), message), loop)
    # Not waited for (about 1 ms a commit): the loop publishes in
    # order, and a failure costs only latency, which the poll bounds.
    _in_flight.add(sent)
    sent.add_done_callback(functools.partial(_log_failed_broadcast, run_id, what))


def _send_held(run_id: int) -> None:
    """On the broadcast loop, when a run's interval ends: its newest held notification."""
    seq = _throttle.release(run_id, time.monotonic())
    if seq is not None:
        _send_from_loop(_broadcast_loop(), run_id, _notice(seq), f"event {seq}")


# A run's notifications go at most once per NOTICE_SECONDS. A chain's steps
# end a millisecond or two apart, and each notification cost the worker a
# trip through the broadcast loop to Redis, and every open page a read of
# the database; the first of a burst goes at once, the newest of the rest
# when the interval ends (a page shows them that much later, at most).
NOTICE_SECONDS = 0.01


class _Throttle:
    """When each run's last notification went, and the newest held back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent: dict[int, float] = {}  # run -> when its last went (time.monotonic)
        self._held: dict[int, int] = {}  # run -> the newest seq held back

    def hold(self, run_id: int, seq: int, now: float) -> float | None:
        """None: send ``seq`` now. Else it is held back: a delay after which
        ``release`` is due (> 0 for the first held this interval, which
        asks for it; 0 when one is asked for already)."""
        with self._lock:
            if run_id in self._held:
                self._held[run_id] = max(self._held[run_id], seq)
                return 0.0
            last = self._sent.get(run_id)
            if last is not None and now - last < NOTICE_SECONDS:
                self._held[run_id] = seq
                return NOTICE_SECONDS - (now - last)
            self._sent[run_id] = now
            if len(self._sent) > 1000:  # runs long quiet need no record
                self._sent = {run: at for run, at in self._sent.items() if now - at < NOTICE_SECONDS}
            return None

    def release(self, run_id: int, now: float) -> int | None:
        """The newest seq held back for ``run_id`` (None: none), sent at ``now``."""
        with self._lock:
            seq = self._held.pop(run_id, None)
            if seq is not None:
                self._sent[run_id] = now
            return seq

    def held(self) -> list[int]:
        with self._lock:
            return list(self._held)


_throttle = _Throttle()


def _log_failed_broadcast(run_id: int, what: str, sent) -> None:
    _in_flight.discard(sent)
    if not sent.cancelled() and sent.exception() is not None:
        log.warning("could not notify dashboards of %s of run %s: %s", what, run_id, sent.exception())


# Broadcasts not yet published. A process that exits right after a commit
# (a management command, a benchmark's writer) publishes them first, or its
# last events would reach the dashboards only at their next poll.
_in_flight: set[concurrent.futures.Future] = set()


FLUSH_SECONDS = 2.0


@atexit.register
def _flush_broadcasts() -> None:
    for run_id in _throttle.held():
        _send_held(run_id)
    if _in_flight:
        concurrent.futures.wait(list(_in_flight), timeout=FLUSH_SECONDS)


_loop: asyncio.AbstractEventLoop | None = None


_loop_pid = 0


_loop_lock = threading.Lock()


def _broadcast_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for broadcasts, in a thread of its own.

    async_to_sync outside an event loop starts a thread and a new loop for
    every call (about 2 ms here), and channels_redis, whose connections
    belong to a loop, connects again each time; one loop that lives on
    keeps both. A forked child (prefork workers) starts its own."""
    global _loop, _loop_pid, _throttle
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():
            # What a parent held back, its loop was to send: a child starts afresh.
            _throttle = _Throttle()
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="zenweb-broadcast", daemon=True).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def _in_sync_to_async_thread() -> bool:
    """True in a thread that sync_to_async runs for an event loop (a view
    under daphne, a consumer's database helper): the in-memory channel layer
    must then be used from that loop."""
    return getattr(SyncToAsync.threadlocal, "main_event_loop_pid", None) == os.getpid()


class NoticeAfterCommit:
    """Tells a run's open pages, once the transaction commits, of the newest
    event its owner wrote in it: one notice per commit however many events
    the owner wrote. The owner (an event sink, a unit of work, a scheduling
    pass) holds it and calls ``wrote`` after each write. A seq is only a
    hint (pages read whatever is in the database after their cursor), so
    one left by a rolled-back transaction is simply replaced by the next."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._newest: int | None = None

    def wrote(self, seq: int) -> None:
        self._newest = seq
        # One callback per write, so one registered in a savepoint that rolls
        # back leaves the others; the first to run sends, the rest find None.
        transaction.on_commit(self._send)

    def _send(self) -> None:
        newest, self._newest = self._newest, None
        if newest is not None:
            broadcast(self.run_id, newest)
