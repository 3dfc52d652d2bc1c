"""The run page's websocket: replay from the client's cursor, then live.

Group messages carry only an event's seq. On each one (and on a slow timer,
for events written by another process or lost by the channel layer) the
consumer sends every event after the last one it sent, read from the
database, so a client never misses or repeats an event.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from runs import actions, live
from runs.models import Run
from runs.stores import run_group

FORBIDDEN = 4403


class RunConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        self.group = run_group(self.run_id)
        self.lock = asyncio.Lock()
        self.poller: asyncio.Task | None = None
        if not await self._may_see():
            await self.close(code=FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.catch_up()
        self.poller = asyncio.create_task(self._poll())

    async def disconnect(self, code: int) -> None:
        if self.poller:
            self.poller.cancel()
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_event(self, message: dict) -> None:
        if message.get("seq", 0) > self.last_seq:
            await self.catch_up()

    async def catch_up(self) -> None:
        async with self.lock:
            while True:
                html, last = await database_sync_to_async(live.render_update)(self.run_id, self.last_seq)
                if not html:
                    return
                await self.send(text_data=html)
                self.last_seq = last

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(settings.ZENWEB_LIVE_POLL_SECONDS)
            await self.catch_up()

    @database_sync_to_async
    def _may_see(self) -> bool:
        try:
            actions.access_run(self.scope["user"], self.run_id)
        except Run.DoesNotExist:
            return False
        return True
