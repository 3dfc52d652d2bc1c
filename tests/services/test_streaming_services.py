"""Streaming in services mode: the worker is a process of its own, the
channel layer and the kept partials are in Redis. A page (a websocket in
this process, as daphne would serve it) that connects mid-answer gets the
text so far, then the rest live, then the stored answer."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connections

from runs.actions import do_create_run
from runs.models import Run
from runs.routing import websocket_urlpatterns
from tests.conftest import register, wait_for_run
from tests.fake_openai_server import Delivery

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

ANSWER = "Tides rise twice a day at Bergen"  # 4 chunks of 8


async def _next_partial(comm: WebsocketCommunicator, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        frame = await comm.receive_from(timeout=max(0.01, deadline - time.monotonic()))
        if frame.startswith("{"):
            return json.loads(frame)["partial"]


async def test_a_page_connecting_mid_answer_gets_it_from_another_process(openai_endpoint, worker_process, owner):
    # Chunks a second apart: a partial that arrives within half a second of
    # a chunk was kept in Redis before the page connected.
    openai_endpoint.push_text(ANSWER, delivery=Delivery(chunk_delay=1.0, chunk_chars=8))
    run = await database_sync_to_async(lambda: do_create_run(register("openai_step"), {}, user=owner))()
    while len(openai_endpoint.streamed) < 2:
        await asyncio.sleep(0.02)
    sent_at = openai_endpoint.streamed[-1][0]
    await asyncio.sleep(0.2)

    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/?after=0")
    comm.scope["user"] = owner
    connected, _ = await comm.connect()
    assert connected
    kept = await _next_partial(comm, timeout=0.6)
    assert time.time() - sent_at < 0.95 and len(openai_endpoint.streamed) == 2
    live = await _next_partial(comm, timeout=3)
    await comm.disconnect()

    assert (kept["step"], kept["text"]) == ("analyse", ANSWER[:16])
    assert live["text"] == ANSWER[:24]
    run = await database_sync_to_async(wait_for_run)(run, 60)
    assert run.status == Run.Status.COMPLETED
    assert await database_sync_to_async(lambda: run.steps.get(step_id="analyse").output)() == ANSWER
    # The consumer's thread keeps its connection; the test database is dropped next.
    await database_sync_to_async(connections.close_all)()
