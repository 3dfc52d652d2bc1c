"""The run page's websocket: replay from the client's cursor, then live.

Group messages carry only an event's seq. On each one (and on a slow timer,
for events written by another process or lost by the channel layer) the
consumer sends every event after the last one it sent, read from the
database, so a client never misses or repeats an event.

A notification only marks the consumer as behind and wakes its sender task:
the consumer's message loop never waits for a render, so notifications do
not queue up behind one, and however many arrive during a render, the next
pass reads them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db.models import Q

from agents.metrics import WEBSOCKET_CLIENTS
from agents.router import COORDINATOR
from runs import actions, live, partials
from runs.models import Run, Step
from runs.store.events import run_group

log = logging.getLogger(__name__)

FORBIDDEN = 4403
# Past ZENWEB_MAX_WEBSOCKETS_PER_USER (like HTTP's 429); the page does not
# reconnect after it.
TOO_MANY_SOCKETS = 4429
# Open run-page sockets per user id, in this process: each one holds a task
# and database reads, so one user must not open hundreds.
OPEN_SOCKETS: Counter[int] = Counter()
# The page reconnects after this one, from its cursor (runs/static/js/live.js).
# Not 1011: daphne sends only 1000 and 3000-4999, and refused 1011 by leaving
# the socket open and silent. zenweb/websockets.py closes with it too.
TRY_AGAIN = 4503
NOTIFICATION = "run.event"


class RunConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.group = run_group(self.run_id)
        self.sender: asyncio.Task | None = None
        # The newest seq a notification announced; the sender is behind
        # while last_seq is below it.
        self.wanted = 0
        self.woken = asyncio.Event()
        self.counted_user: int | None = None
        if not await self._may_see():
            await self.close(code=FORBIDDEN)
            return
        user_id = self.scope["user"].pk
        cap = settings.ZENWEB_MAX_WEBSOCKETS_PER_USER
        if cap and OPEN_SOCKETS[user_id] >= cap:
            # Accepted first: a close before accepting reaches the browser as
            # a failed handshake (1006), without this code and reason.
            await self.accept()
            await self.close(code=TOO_MANY_SOCKETS, reason=f"too many live pages open (at most {cap} per user)")
            return
        OPEN_SOCKETS[user_id] += 1
        WEBSOCKET_CLIENTS.inc()
        self.counted_user = user_id
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        # The run page asks to be told when the replay is done, to say how
        # many events it caught up after a reconnect (runs/static/js/live.js).
        self.say_caught_up = query.get("caught_up") == ["1"]
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.sender = asyncio.create_task(self._send_updates())
        self.sender.add_done_callback(self._sender_stopped)

    async def disconnect(self, code: int) -> None:
        if self.counted_user is not None:
            OPEN_SOCKETS[self.counted_user] -= 1
            WEBSOCKET_CLIENTS.dec()
            if OPEN_SOCKETS[self.counted_user] <= 0:
                del OPEN_SOCKETS[self.counted_user]
            self.counted_user = None
        if self.sender:
            self.sender.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dispatch(self, message: dict) -> None:
        # channels' dispatch first runs close_old_connections through
        # sync_to_async, on the one thread this process runs all such calls
        # on, queued behind every dashboard's database work: at a notification
        # per commit times 20 dashboards that queue, not the work, was the
        # delay. A notification touches no database here (the sender's reads
        # close old connections themselves), so it skips that trip.
        if message.get("type") == NOTIFICATION:
            await self.run_event(message)
        elif message.get("type") == partials.PARTIAL_TYPE:
            await self.run_partial(message)
        else:
            await super().dispatch(message)

    async def run_event(self, message: dict) -> None:
        seq = message.get("seq", 0)
        if seq > self.last_seq:
            self.wanted = max(self.wanted, seq)
            self.woken.set()

    async def run_partial(self, message: dict) -> None:
        """An answer so far (runs/partials.py): sent as it is, no database."""
        await self.send(text_data=partials.frame(message))

    async def _send_updates(self) -> None:
        """The one task that sends: the replay, then a pass on each wake-up
        (a notification) or each poll interval without one."""
        await self.catch_up(until_empty=True)
        if self.say_caught_up:
            await self.send(text_data=json.dumps({"caught_up": self.last_seq}))
        # A page that opens mid-answer shows the text so far at once.
        for payload in await self._partials_now():
            await self.send(text_data=partials.frame(payload))
        while True:
            notified = await self._wait()
            await self.catch_up(until_empty=not notified)

    def _sender_stopped(self, sender: asyncio.Task) -> None:
        # A failed read (the database away) must not leave a page open that
        # no longer updates: closed, it reconnects and replays from its cursor.
        if sender.cancelled() or sender.exception() is None:
            return
        log.error("run %s: live updates failed", self.run_id, exc_info=sender.exception())
        self.closing = asyncio.ensure_future(self.close(code=TRY_AGAIN))

    async def _wait(self) -> bool:
        """Wait for a notification (True) or the poll interval (False)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.woken.wait(), settings.ZENWEB_LIVE_POLL_SECONDS)
        notified = self.woken.is_set()
        # No await since wait() returned: a notification arriving from now
        # on sets it again and finds the next pass.
        self.woken.clear()
        return notified

    async def catch_up(self, *, until_empty: bool) -> None:
        """Send the events after last_seq. After a notification, stop once the
        announced seq is sent (an empty read after each pass would cost every
        dashboard a database trip per commit); after a poll, or at the
        start, read until nothing is new."""
        while True:
            after = self.last_seq
            html, last = await live.shared_update(self.run_id, after)
            if not html and self.wanted > after:
                # A shared read may have started before the notified event
                # committed: only a read of our own says that nothing is new.
                html, last = await database_sync_to_async(live.render_update)(self.run_id, after)
            if not html:
                return
            for frame in html.split(live.FRAME_BREAK):
                await self.send(text_data=frame)
            self.last_seq = last
            # A batch may have stopped at live.BATCH events with more behind it.
            may_be_cut = last - after >= live.BATCH
            if not until_empty and not may_be_cut and last >= self.wanted:
                return

    @database_sync_to_async
    def _partials_now(self) -> list[dict]:
        # Only steps that may be generating: one cache read, however big the run.
        running = Step.objects.filter(Q(status=Step.Status.RUNNING) | Q(resuming=True), run_id=self.run_id)
        steps = {COORDINATOR, *running.values_list("step_id", flat=True)}
        return partials.current(self.run_id, sorted(steps))

    @database_sync_to_async
    def _may_see(self) -> bool:
        try:
            actions.access_run(self.scope["user"], self.run_id)
        except Run.DoesNotExist:
            return False
        return True
