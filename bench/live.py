"""Live stream: events from a worker's write to websocket clients, through
daphne and channels_redis (RedisPubSubChannelLayer, as settings choose with
REDIS_URL).

A writer process stands in for a worker: it writes events through a unit
of work's sink, five to a transaction (one step turn's worth), held and
written together as a turn's are (runs/store/unit_of_work.py), and notes the time each
transaction committed. daphne serves zenweb's ASGI app; 20
websocket clients, logged in, watch the run page's socket. Each message a
client gets is the consumer's HTML update, which ends with the last seq it
covers (``id="last-seq" data-seq="N"``), so every event gets a delivery time.

Throughput: 1,000 events written as fast as the writer can, divided by the
time from the first commit until the slowest client has them all. Latency:
1,500 events paced at 500/s (3 s, if the writer keeps up); commit to arrival
at each client, p50 and p99 over all clients and events.

The clients speak the websocket protocol themselves (a few lines of asyncio)
so the bench adds no dependency.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import time
from typing import Any

from bench.common import JSON_MARK, PYTHON, ROOT, Context, Result, Target, log_trouble, run_child, skipped

CLIENTS = 20
BATCH = 5
BURST_EVENTS = 1_000
PACED_RATE = 500
PACED_SECONDS = 3
TARGET_RATE = Target(">=", 2_000, ">= 2,000/s")
TARGET_P99 = Target("<", 100, "< 100 ms")
TARGET_MISSING = Target("<=", 0, "0")
LAST_SEQ = re.compile(rb'id="last-seq" data-seq="(\d+)"')


# The writer (a child process with Django) ------------------------------------


def prepare() -> dict[str, Any]:
    """A user with a session, and a running workflow to attach runs to."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from runs.actions import do_register_workflow

    user = get_user_model().objects.create_user("bench-live")
    client = Client()
    client.force_login(user)
    workflow, _ = do_register_workflow(
        "name: bench-live\nagents:\n  worker: {description: worker agent, provider: scripted}\n"
        "steps:\n  - {id: talk, agent: worker}\n",
        "bench/live.py",
    )
    return {"session": client.cookies["sessionid"].value, "user_id": user.pk, "workflow_id": workflow.pk}


def new_run(user_id: int, workflow_id: int) -> int:
    from django.utils import timezone

    from runs.models import Run, Step

    run = Run.objects.create(
        workflow_id=workflow_id, created_by_id=user_id, status=Run.Status.RUNNING, started=timezone.now()
    )
    Step.objects.create(run=run, step_id="coordinator", kind=Step.Kind.COORDINATOR, agent="coordinator")
    Step.objects.create(run=run, step_id="talk", agent="worker", status=Step.Status.RUNNING)
    return run.pk


def write(run_id: int, events: int, rate: float) -> dict[str, Any]:
    """Write ``events`` events, BATCH per transaction, at ``rate`` events/s
    (0: as fast as possible). Returns the commit time (time.time()) of each seq."""
    from django.db import transaction

    from agents.events import Event
    from agents.events.run_events import AgentTurn
    from runs.store.sql import store
    from runs.store.unit_of_work import UnitOfWork

    uow = UnitOfWork(run_id)
    committed: list[float] = []
    start = time.monotonic()
    written = 0
    while written < events:
        if rate:
            due = start + written / rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        size = min(BATCH, events - written)
        with transaction.atomic(), uow:
            store().lock_run(run_id)
            # Registered first, so it runs first after commit: before the broadcasts.
            transaction.on_commit(lambda size=size: committed.extend([time.time()] * size))
            for n in range(size):
                turn = AgentTurn(
                    turn=written + n + 1,
                    agent="talker",
                    content="progress",
                    tool_calls=[],
                    prompt_tokens=None,
                    completion_tokens=None,
                )
                uow.sink.emit(Event.of(turn, "talk"))
        written += size
    elapsed = time.monotonic() - start
    return {"committed": committed, "write_rate": events / elapsed}


# The clients (asyncio, in the parent) -----------------------------------------


class Client:
    """A websocket client that records when each seq arrived."""

    def __init__(self) -> None:
        self.arrived: dict[int, float] = {}
        self.last = 0
        self._fin = True
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self, port: int, run_id: int, session: str) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /ws/runs/{run_id}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: http://127.0.0.1:{port}\r\nCookie: sessionid={session}\r\n\r\n"
        )
        self.writer.write(request.encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise RuntimeError(f"websocket refused: {head.splitlines()[0].decode(errors='replace')}")

    async def listen(self, until: int) -> None:
        """Read messages until seq ``until`` has arrived."""
        assert self.reader is not None
        parts: list[bytes] = []
        while self.last < until:
            opcode, payload = await self.read_frame()
            if opcode == 9:  # ping: answer, or daphne closes the socket
                self.send_frame(10, payload)
                continue
            if opcode == 8:
                raise RuntimeError("the server closed the websocket")
            parts.append(payload)
            if not self._fin:
                continue
            text, parts = b"".join(parts), []
            now = time.time()
            found = LAST_SEQ.search(text)
            if found:
                last = int(found.group(1))
                for seq in range(self.last + 1, last + 1):
                    self.arrived[seq] = now
                self.last = max(self.last, last)

    async def read_frame(self) -> tuple[int, bytes]:
        assert self.reader is not None
        first, second = await self.reader.readexactly(2)
        self._fin = bool(first & 0x80)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
        mask = await self.reader.readexactly(4) if second & 0x80 else b""
        payload = await self.reader.readexactly(length)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return first & 0x0F, payload

    def send_frame(self, opcode: int, payload: bytes) -> None:
        # Client frames are masked (RFC 6455); payloads here are tiny.
        assert self.writer is not None
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def close(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.send_frame(8, struct.pack("!H", 1000))
                self.writer.close()


async def _one_round(port: int, env: dict[str, str], seed: dict, events: int, rate: float) -> dict[str, Any]:
    run_id = await asyncio.to_thread(
        run_child, "bench.live", "new_run", env, user_id=seed["user_id"], workflow_id=seed["workflow_id"]
    )
    clients = [Client() for _ in range(CLIENTS)]
    await asyncio.gather(*(client.connect(port, run_id, seed["session"]) for client in clients))
    listening = [asyncio.create_task(client.listen(events)) for client in clients]
    command = [
        PYTHON,
        "-m",
        "bench.child",
        "bench.live",
        "write",
        json.dumps({"run_id": run_id, "events": events, "rate": rate}),
    ]
    writer = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await writer.communicate()
    lines = [line for line in out.decode().splitlines() if line.startswith(JSON_MARK)]
    if not lines:
        raise RuntimeError(f"the writer failed:\n{err.decode()[-2000:]}")
    written = json.loads(lines[-1][len(JSON_MARK) :])
    done, pending = await asyncio.wait(listening, timeout=60)
    for task in pending:
        task.cancel()
    for task in done:
        task.result()  # a client's error is the round's error
    for client in clients:
        client.close()
    committed = written["committed"]
    latencies = [
        (client.arrived[seq] - committed[seq - 1]) * 1000
        for client in clients
        for seq in range(1, events + 1)
        if seq in client.arrived
    ]
    received = sum(len(client.arrived) for client in clients)
    slowest = max((max(client.arrived.values()) for client in clients if client.arrived), default=0.0)
    return {
        "complete": received == events * CLIENTS,
        "received": received,
        "expected": events * CLIENTS,
        "rate": events / (slowest - committed[0]) if received == events * CLIENTS else 0.0,
        "p50": statistics.median(latencies) if latencies else None,
        "p99": statistics.quantiles(latencies, n=100)[98] if len(latencies) > 100 else None,
        # A delivery near the consumers' poll interval (2 s) means a
        # notification came too late to matter, or was lost.
        "worst": max(latencies) if latencies else None,
        "write_rate": written["write_rate"],
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def daphne(env: dict[str, str], log_path):
    port = _free_port()
    command = [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "zenweb.asgi:application"]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"daphne did not start:\n{open(log_path).read()[-2000:]}")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


THROUGHPUT = f"live: events/s to each of {CLIENTS} clients (burst of {BURST_EVENTS:,})"
P50 = f"live: latency p50, {CLIENTS} clients, writer paced at {PACED_RATE}/s"
P99 = f"live: latency p99, {CLIENTS} clients, writer paced at {PACED_RATE}/s"
MISSING = f"live: events missing at {CLIENTS} clients, all rounds"
SETUP = f"1 daphne process, 1 writer process ({BATCH} events per transaction, held as in a turn)"


def measure(ctx: Context) -> list[Result]:
    names = [(THROUGHPUT, "events/s", True), (P50, "ms", False), (P99, "ms", False), (MISSING, "events", False)]
    problem = ctx.redis_problem and f"needs Redis for channels_redis ({ctx.redis_problem})"
    if problem:
        return [skipped("live", name, "redis", unit, problem, higher_is_better=hib) for name, unit, hib in names]
    backend, label = ctx.with_redis()
    seed = run_child("bench.live", "prepare", backend.env)
    rounds_burst, rounds_paced = [], []
    (ctx.tmp / "live").mkdir(exist_ok=True)
    with daphne(backend.env, ctx.tmp / "live" / "daphne.log") as port:
        for _ in range(ctx.repeats):
            rounds_burst.append(asyncio.run(_one_round(port, backend.env, seed, BURST_EVENTS, 0)))
            rounds_paced.append(
                asyncio.run(_one_round(port, backend.env, seed, PACED_RATE * PACED_SECONDS, PACED_RATE))
            )
    burst_note, paced_note = _notes(rounds_burst, rounds_paced)
    trouble = log_trouble(ctx.tmp / "live")
    if trouble:
        burst_note += f"; DISTURBED: {trouble}"
        paced_note += f"; DISTURBED: {trouble}"
    return [
        Result(
            "live",
            THROUGHPUT,
            label,
            "events/s",
            [r["rate"] for r in rounds_burst if r["complete"]],
            target=TARGET_RATE,
            note=burst_note,
        ),
        *_latency_rows(label, rounds_paced, paced_note),
        Result(
            "live",
            MISSING,
            label,
            "events",
            [sum(r["expected"] - r["received"] for r in rounds_burst + rounds_paced)],
            higher_is_better=False,
            target=TARGET_MISSING,
            note=f"{len(rounds_burst + rounds_paced)} rounds, {CLIENTS} clients each",
        ),
    ]


def _notes(rounds_burst: list[dict[str, Any]], rounds_paced: list[dict[str, Any]]) -> tuple[str, str]:
    """What the burst's and the paced rounds' rows say beside their figures:
    how fast the writer wrote, whether it or delivery was the limit, the
    slowest delivery, and rounds in which a client missed events."""
    flat_out = statistics.median(r["write_rate"] for r in rounds_burst)
    paced = statistics.median(r["write_rate"] for r in rounds_paced)
    delivered = [r["rate"] for r in rounds_burst if r["complete"]]
    burst_note = f"{SETUP}; the writer wrote {flat_out:,.0f} events/s"
    if delivered and statistics.median(delivered) >= 0.9 * flat_out:
        burst_note += ": delivery kept pace, the writer is the limit"
    paced_note = f"{SETUP}; asked for {PACED_RATE}/s, wrote {paced:,.0f}/s"
    if paced < 0.9 * PACED_RATE:
        paced_note += " (the writer could not keep up: it shares the 2 cores with daphne)"
    slowest = [r["worst"] for r in rounds_paced if r["worst"] is not None]
    if slowest:
        paced_note += f"; slowest delivery {max(slowest):,.0f} ms"
    incomplete = [r for r in rounds_burst + rounds_paced if not r["complete"]]
    if incomplete:
        worst = min(incomplete, key=lambda r: r["received"] / r["expected"])
        short = f"; {len(incomplete)} round(s) incomplete, worst {worst['received']:,} of {worst['expected']:,}"
        burst_note += short
        paced_note += short
    return burst_note, paced_note


def _latency_rows(label: str, rounds_paced: list[dict[str, Any]], note: str) -> list[Result]:
    p50s = [r["p50"] for r in rounds_paced if r["p50"] is not None]
    p99s = [r["p99"] for r in rounds_paced if r["p99"] is not None]
    return [
        Result("live", P50, label, "ms", p50s, higher_is_better=False, note=note),
        Result("live", P99, label, "ms", p99s, higher_is_better=False, target=TARGET_P99, note=note),
    ]
