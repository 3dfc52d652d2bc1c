"""The websocket endpoint when something is wrong: an unknown path, the
database or Redis failing under it. Each is a close the page understands
(never daphne's refused 1011, never an HTTP 500 with a traceback)."""

from __future__ import annotations

import logging
import socket

import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator
from django.db import OperationalError

from runs import live
from tests.integration.test_websocket import make_run, received_seqs
from zenweb.websockets import NOT_FOUND, TRY_AGAIN, websocket_application

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://testserver")]


def served(path: str, user=None) -> WebsocketCommunicator:
    """A client of the websocket application zenweb.asgi serves."""
    comm = WebsocketCommunicator(websocket_application(), path, headers=ORIGIN)
    if user is not None:
        # AuthMiddlewareStack keeps a user already in the scope (a test has no session).
        comm.scope["user"] = user
    return comm


def valid_close_code(code: int) -> bool:
    # What daphne (autobahn) agrees to send: anything else leaves the socket open.
    return code == 1000 or 3000 <= code <= 4999


async def test_it_closes_an_unknown_path_with_404_and_no_traceback(caplog):
    caplog.set_level(logging.WARNING)
    comm = served("/ws/nothing-here/")

    connected, _ = await comm.connect()
    assert connected
    closed = await comm.receive_output(timeout=3)

    assert closed == {"type": "websocket.close", "code": NOT_FOUND}
    assert not [r for r in caplog.records if r.exc_info]


async def test_it_closes_with_a_code_the_page_retries_when_the_database_fails_mid_stream(owner, monkeypatch):
    run = await database_sync_to_async(make_run)(owner, 3)
    comm = served(f"/ws/runs/{run.pk}/?after=0", owner)
    connected, _ = await comm.connect()
    assert connected
    assert await received_seqs(comm, until=3) == [1, 2, 3]

    def connection_lost(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(live, "shared_update", connection_lost)
    monkeypatch.setattr(live, "render_update", connection_lost)
    await comm.send_input({"type": "run.event", "seq": 4})  # what a commit's notification does

    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    assert closed["code"] == TRY_AGAIN and valid_close_code(closed["code"])


async def test_it_refuses_a_connect_cleanly_when_the_database_is_away(owner, monkeypatch, caplog):
    caplog.set_level(logging.WARNING)
    run = await database_sync_to_async(make_run)(owner, 1)

    def database_away(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr("runs.actions.access_run", database_away)
    comm = served(f"/ws/runs/{run.pk}/", owner)

    connected, code = await comm.connect()

    assert not connected
    assert code == TRY_AGAIN
    assert not [r for r in caplog.records if r.exc_info]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_it_refuses_a_connect_cleanly_when_redis_is_away(owner, settings, caplog):
    caplog.set_level(logging.WARNING)
    run = await database_sync_to_async(make_run)(owner, 1)
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{closed_port()}/0"]},
        }
    }
    channel_layers.backends.clear()
    try:
        comm = served(f"/ws/runs/{run.pk}/", owner)
        connected, code = await comm.connect(timeout=10)
    finally:
        channel_layers.backends.clear()

    assert not connected
    assert code == TRY_AGAIN
    assert not [r for r in caplog.records if r.exc_info]
