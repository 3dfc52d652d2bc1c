"""Streaming: how long a model's first token takes from the endpoint to a
page, in services mode (a worker process, daphne, Redis).

The model is tests/fake_openai_server.py in this process, reached by the
worker through the real openai SDK; it notes when it writes each chunk to
the socket. A run of one step on the openai provider is started per round;
CLIENTS websocket clients (bench/live.py's) open its page's socket, and
only then does the endpoint start answering (a gate). Each client notes
when the first partial-answer frame arrives: arrival minus the moment the
endpoint sent the first token, over every client and round, p50 and p99.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from bench.common import (
    PYTHON,
    ROOT,
    Context,
    Result,
    Target,
    clear_redis_queues,
    log_trouble,
    run_child,
    skipped,
)
from bench.common import worker_processes as start_workers
from bench.live import Client, daphne

CLIENTS = 10
ROUNDS = 10
# 20 chunks of 4 characters, 20 ms apart: the worker sends the first token
# at once and then at most every 100 ms.
ANSWER = "The first token of this answer is what the bench times, from endpoint to page."
CHUNK_DELAY = 0.02
TARGET_P99 = Target("<", 150, "< 150 ms")
WORKFLOW = """\
name: bench-streaming
agents:
  analyst: {description: analyst agent, provider: openai, system: You answer.}
steps:
  - {id: answer, agent: analyst, instructions: Answer.}
"""


# In a child process with Django ----------------------------------------------


def prepare() -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.test import Client as DjangoClient

    from runs.actions import do_register_workflow

    user = get_user_model().objects.create_user("bench-streaming")
    client = DjangoClient()
    client.force_login(user)
    workflow, _ = do_register_workflow(WORKFLOW, "bench/streaming.py")
    return {"session": client.cookies["sessionid"].value, "user_id": user.pk, "workflow_id": workflow.pk}


def start_runs(user_id: int, workflow_id: int) -> int:
    """Start a run for each line read on stdin, printing ``RUN <id>`` for
    each: one process for every round (a child per run cost seconds)."""
    from django.contrib.auth import get_user_model

    from runs.actions import do_create_run
    from runs.models import Workflow

    user = get_user_model().objects.get(pk=user_id)
    workflow = Workflow.objects.get(pk=workflow_id)
    started = 0
    for _line in sys.stdin:
        print(f"RUN {do_create_run(workflow, {}, user=user).pk}", flush=True)
        started += 1
    return started


# The clients (asyncio, in the parent) -----------------------------------------


async def first_partial(client: Client) -> float:
    """Read frames until the first partial answer; when it arrived."""
    while True:
        opcode, payload = await client.read_frame()
        if opcode == 9:  # ping: answer, or daphne closes the socket
            client.send_frame(10, payload)
            continue
        if opcode == 8:
            raise RuntimeError("the server closed the websocket")
        if payload.startswith(b'{"partial"'):
            return time.time()


async def _one_round(port: int, starter: subprocess.Popen, seed: dict, endpoint) -> list[float]:
    from tests.fake_openai_server import Delivery

    gate = threading.Event()
    endpoint.push_text(ANSWER, delivery=Delivery(chunk_delay=CHUNK_DELAY, gate=gate))
    asked = len(endpoint.requests)
    run_id = await asyncio.to_thread(_start_run, starter)
    clients = [Client() for _ in range(CLIENTS)]
    await asyncio.gather(*(client.connect(port, run_id, seed["session"]) for client in clients))
    listening = [asyncio.create_task(first_partial(client)) for client in clients]
    # The step's request is waiting at the gate: every page is open.
    deadline = time.monotonic() + 60
    while len(endpoint.requests) <= asked:
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} never asked the model")
        await asyncio.sleep(0.01)
    streamed = len(endpoint.streamed)
    gate.set()
    try:
        arrivals = await asyncio.wait_for(asyncio.gather(*listening), 30)
    finally:
        for client in clients:
            client.close()
    sent = endpoint.streamed[streamed][0]
    return [(arrived - sent) * 1000 for arrived in arrivals]


def _start_run(starter: subprocess.Popen) -> int:
    assert starter.stdin is not None and starter.stdout is not None
    starter.stdin.write("run\n")
    starter.stdin.flush()
    while True:
        line = starter.stdout.readline()
        if not line:
            raise RuntimeError("the process starting the runs ended")
        if line.startswith("RUN "):
            return int(line.split()[1])


def measure(ctx: Context) -> list[Result]:
    name = f"streaming: first token, endpoint to page, p99 ({CLIENTS} clients)"
    median_name = f"streaming: first token, endpoint to page, p50 ({CLIENTS} clients)"
    problem = ctx.redis_problem and f"needs Redis for the channel layer and the worker ({ctx.redis_problem})"
    if problem:
        return [
            skipped("streaming", median_name, "redis", "ms", problem, higher_is_better=False),
            skipped("streaming", name, "redis", "ms", problem, higher_is_better=False),
        ]
    backend, label = ctx.with_redis()
    from tests.fake_openai_server import FakeOpenAIServer

    logs = ctx.tmp / "streaming"
    logs.mkdir(exist_ok=True)
    p50s: list[float] = []
    p99s: list[float] = []
    with FakeOpenAIServer() as endpoint:
        env = backend.env | {
            "OPENAI_BASE_URL": endpoint.base_url,
            "OPENAI_API_KEY": "bench-not-a-secret",
            "ZENWEB_MODEL": "bench-model",
        }
        seed = run_child("bench.streaming", "prepare", env)
        ids = {"user_id": seed["user_id"], "workflow_id": seed["workflow_id"]}
        clear_redis_queues("celery")
        command = [PYTHON, "-m", "bench.child", "bench.streaming", "start_runs", json.dumps(ids)]
        with (
            start_workers("zenweb", 1, env, logs),
            daphne(env, logs / "daphne.log") as port,
            open(logs / "starter.log", "w") as starter_log,
            subprocess.Popen(
                command, cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=starter_log
            ) as starter,
        ):
            began = time.monotonic()
            for _ in range(ctx.repeats):
                latencies: list[float] = []
                for _ in range(ROUNDS):
                    latencies += asyncio.run(_one_round(port, starter, seed, endpoint))
                p50s.append(statistics.median(latencies))
                p99s.append(statistics.quantiles(latencies, n=100)[98])
                if time.monotonic() - began > ctx.budget:
                    break
            # Its last line (the count) is read, or it writes into a closed pipe.
            starter.stdin.close()
            starter.stdout.read()
        clear_redis_queues("celery")
    note = (
        f"{ROUNDS} runs x {CLIENTS} websocket clients a repeat; 1 worker process, 1 daphne; "
        "the openai provider through the SDK to a local endpoint streaming a chunk every 20 ms"
    )
    trouble = log_trouble(logs)
    if trouble:
        note += f"; DISTURBED: {trouble}"
    return [
        Result("streaming", median_name, label, "ms", p50s, higher_is_better=False, note=note),
        Result("streaming", name, label, "ms", p99s, higher_is_better=False, target=TARGET_P99, note=note),
    ]
