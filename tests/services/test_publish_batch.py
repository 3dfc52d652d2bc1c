"""Tasks queued together (runs/queue.py queue_after_commit: a fan-out's
first turns, a turn's tool calls) reach Redis after commit, every one, in
the order they were queued, however many batches they take; nothing
reaches it from a transaction that rolls back."""

from __future__ import annotations

import base64
import json

import pytest
import redis
from django.conf import settings
from django.db import transaction

from runs import queue as task_queue
from zenweb.celery import app

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# The default queue (a task's own queue= is deprecated in Celery): no worker
# runs while these tests do (the services tests start theirs and stop them).
QUEUE = app.conf.task_default_queue


@app.task(name="tests.services.probe")
def probe(number: int, text: str) -> None:  # never run: the test reads its queue
    raise AssertionError("no worker runs while the probe's messages are queued")


@pytest.fixture
def queue():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(QUEUE)
    yield client
    client.delete(QUEUE)


def queued_args(client: redis.Redis) -> list[list]:
    """The arguments of every probe message in the queue, oldest first
    (kombu LPUSHes, a worker BRPOPs from the other end)."""
    found = []
    for raw in reversed(client.lrange(QUEUE, 0, -1)):
        envelope = json.loads(raw)
        assert envelope["headers"]["task"] == "tests.services.probe"
        args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        found.append(args)
    return found


def test_tasks_queued_together_all_reach_redis_in_order_after_commit(queue):
    calls = [(number, f"call {number}") for number in range(task_queue.PUBLISH_BATCH * 2 + 5)]

    with transaction.atomic():
        task_queue.queue_after_commit(probe.name, calls)
        assert queue.llen(QUEUE) == 0  # not before commit

    assert queued_args(queue) == [list(call) for call in calls]


def test_a_rolled_back_transaction_queues_nothing(queue):
    with pytest.raises(RuntimeError), transaction.atomic():
        task_queue.queue_after_commit(probe.name, [(1, "one"), (2, "two")])
        raise RuntimeError("the turn failed")

    assert queue.llen(QUEUE) == 0
