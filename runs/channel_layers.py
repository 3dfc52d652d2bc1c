"""The embedded layout's channel layer: channels' in-memory layer, made safe
to send to from another thread's event loop."""

from __future__ import annotations

import asyncio

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    """Embedded, worker threads broadcast from an event loop of their own
    (runs/store/events.py ``broadcast``) to the queues daphne's loop waits on. An
    asyncio queue is not thread-safe: a put from another loop hands the
    waiting consumer its message without waking its loop, so the dashboard
    heard of the event only when something else woke that loop (its poll, at
    worst). A send to a queue a running loop waits on is made on that loop."""

    async def send(self, channel, message):
        queue = self.channels.get(channel)
        # asyncio binds a queue to the loop of the first getter that waits on it.
        home = getattr(queue, "_loop", None)
        if home is not None and home is not asyncio.get_running_loop() and home.is_running():
            sent = asyncio.run_coroutine_threadsafe(super().send(channel, message), home)
            await asyncio.wrap_future(sent)
            return
        await super().send(channel, message)

    def listening(self, group: str) -> bool:
        """Whether any channel is in ``group`` now. A dict read, safe from
        any thread: a broadcast to a run nobody watches in this process is
        skipped before it costs a trip through an event loop's thread."""
        return bool(self.groups.get(group))
