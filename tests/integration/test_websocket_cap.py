"""One user cannot hold more than ZENWEB_MAX_WEBSOCKETS_PER_USER live pages open."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from runs.consumers import TOO_MANY_SOCKETS
from tests.integration.test_websocket import communicator, make_run

pytestmark = pytest.mark.django_db(transaction=True)


async def test_it_refuses_a_users_socket_past_the_cap_with_a_clear_close(settings, owner, teammate):
    settings.ZENWEB_MAX_WEBSOCKETS_PER_USER = 2
    run = await database_sync_to_async(make_run)(owner, 1)
    theirs = await database_sync_to_async(make_run)(teammate, 1)
    open_ = [communicator(owner, run, after=1) for _ in range(2)]
    for comm in open_:
        assert (await comm.connect())[0]

    extra = communicator(owner, run, after=1)
    await extra.connect()
    closed = await extra.receive_output(timeout=5)
    other_user = communicator(teammate, theirs, after=1)
    other_connected, _ = await other_user.connect()

    assert closed == {
        "type": "websocket.close",
        "code": TOO_MANY_SOCKETS,
        "reason": "too many live pages open (at most 2 per user)",
    }
    assert other_connected and await other_user.receive_nothing(timeout=0.2)
    await open_[0].disconnect()
    again = communicator(owner, run, after=1)
    assert (await again.connect())[0]
    assert await again.receive_nothing(timeout=0.2)
    for comm in (open_[1], again, other_user):
        await comm.disconnect()
