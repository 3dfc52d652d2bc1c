"""A worker's commit tells the dashboards through the channel layer (Redis
pub/sub, channels' public group_send): a consumer subscribed through the
layer hears it, and hears every one of a worker's commits in order."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from runs.store.events import broadcast, run_group

pytestmark = [pytest.mark.services, pytest.mark.django_db]


async def test_a_commits_broadcast_reaches_a_consumer_subscribed_through_the_layer():
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


async def test_a_consumer_hears_every_commit_in_order():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(run_group(424243), channel)
    try:
        for seq in range(1, 6):
            await sync_to_async(broadcast, thread_sensitive=False)(424243, seq)
        heard = [(await asyncio.wait_for(layer.receive(channel), 5))["seq"] for _ in range(5)]
    finally:
        await layer.group_discard(run_group(424243), channel)

    assert heard == [1, 2, 3, 4, 5]
