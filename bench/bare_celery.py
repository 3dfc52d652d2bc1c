"""The bare Celery app the orchestration figures are compared with: no
Django, no database, one no-op task. Its settings are zenweb's (CELERY_* in
zenweb/settings.py), so the two differ only in the work a task does.

Workers: `celery -A bench.bare_celery worker` with BENCH_BROKER_URL set (the
memory broker when it is not, for a worker thread in the driver's process).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter

from celery import Celery

from bench.common import POLL_SECONDS

BROKER_URL = os.environ.get("BENCH_BROKER_URL", "memory://localhost/")
REDIS = BROKER_URL.startswith("redis")
QUEUE = "bench-bare"

# Not the current app: the orchestration driver also sends zenweb's tasks,
# which would go to this app's queue if it were.
app = Celery("bench_bare", broker=BROKER_URL, set_as_current=False)
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    broker_transport_options={} if REDIS else {"polling_interval": 0.01},
)

# Where finished no-ops are counted: a Redis counter across processes, or
# this process's memory when worker and driver share it.
_counts: Counter[str] = Counter()
_lock = threading.Lock()
_redis = None


def _client():
    global _redis
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(BROKER_URL)
    return _redis


def _count(key: str) -> None:
    if REDIS:
        _client().incr(key)
    else:
        with _lock:
            _counts[key] += 1


def _done(key: str) -> int:
    if REDIS:
        return int(_client().get(key) or 0)
    with _lock:
        return _counts[key]


@app.task
def fan_out(width: int, key: str) -> None:
    """Like start_run: one task that enqueues the width of the workflow."""
    for _ in range(width):
        noop.delay(key)


@app.task
def noop(key: str, last: bool = False) -> None:
    if last:
        _finished(key)  # before the count: the driver reads the time once the count is full
    _count(key)


# When the last no-op of a chain ended, by this host's clock (time.time()):
# a chain's wall ends there, not when the driver's poll saw it.
_finish_times: dict[str, float] = {}


def _finished(key: str) -> None:
    if REDIS:
        _client().set(f"{key}:at", repr(time.time()))
    else:
        with _lock:
            _finish_times[key] = time.time()


def _finish_time(key: str) -> float:
    if REDIS:
        return float(_client().get(f"{key}:at"))
    with _lock:
        return _finish_times.pop(key)


def start_worker_thread(concurrency: int) -> threading.Thread:
    """The embedded layout: a threads-pool worker in this process."""
    from zenweb.workers import start_worker_thread as start

    return start(app, concurrency, name="bench-bare-worker")


def fan_out_and_wait(width: int, timeout: float = 300) -> float:
    """Seconds from enqueueing the fan-out to the last no-op done."""
    key = f"bench-bare:{uuid.uuid4().hex}"
    start = time.perf_counter()
    fan_out.delay(width, key)
    deadline = time.monotonic() + timeout
    while _done(key) < width:
        if time.monotonic() > deadline:
            raise TimeoutError(f"bare Celery: {_done(key)} of {width} no-ops done after {timeout} s")
        time.sleep(POLL_SECONDS)
    elapsed = time.perf_counter() - start
    if REDIS:
        _client().delete(key)
    return elapsed


def chain_and_wait(length: int, timeout: float = 300) -> float:
    """Seconds from sending a `celery.chain` of ``length`` no-ops to the end
    of the last, by the clock reading it took as it ended: each link is
    published by the worker that ran the one before. (The poll only says
    when to look: ended by it, every wall fell on its 10 ms grid.)"""
    from celery import chain

    key = f"bench-bare:{uuid.uuid4().hex}"
    start = time.time()
    chain(*(noop.si(key, last=n == length - 1) for n in range(length))).delay()
    deadline = time.monotonic() + timeout
    while _done(key) < length:
        if time.monotonic() > deadline:
            raise TimeoutError(f"bare Celery: {_done(key)} of {length} chained no-ops done after {timeout} s")
        time.sleep(POLL_SECONDS)
    elapsed = _finish_time(key) - start
    if REDIS:
        _client().delete(key, f"{key}:at")
    return elapsed


def drive(width: int, repeats: int, warmup: int, embedded_concurrency: int = 0) -> list[float]:
    """In a child process: time ``repeats`` fan-outs after one warm-up of
    ``warmup`` tasks. With ``embedded_concurrency`` the worker is a thread here."""
    if embedded_concurrency:
        start_worker_thread(embedded_concurrency)
    fan_out_and_wait(warmup)
    return [fan_out_and_wait(width) for _ in range(repeats)]
