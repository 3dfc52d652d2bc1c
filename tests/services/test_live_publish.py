"""A worker's commit tells the dashboards through Redis with one blocking
PUBLISH (zenweb/pubsub_publisher.py), in the pub/sub layer's own format:
a consumer subscribed through the layer hears it."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from runs.stores import broadcast, run_group
from zenweb.pubsub_publisher import pubsub_publisher

pytestmark = [pytest.mark.services, pytest.mark.django_db]


async def test_a_commits_broadcast_reaches_a_consumer_subscribed_through_the_layer():
    assert pubsub_publisher() is not None  # the blocking path, not the layer's event loop
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(run_group(424242), channel)
    try:
        # From a plain thread, as a worker's on_commit runs it.
        await sync_to_async(broadcast, thread_sensitive=False)(424242, 7)
        message = await asyncio.wait_for(layer.receive(channel), 5)
    finally:
        await layer.group_discard(run_group(424242), channel)

    assert message == {"type": "run.event", "seq": 7}
