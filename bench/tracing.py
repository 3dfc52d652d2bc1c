"""What tracing costs: the chain's 20 steps (bench/chain.py) with
OpenTelemetry on, exporting over OTLP/HTTP to a receiver in this process
that reads and drops what it is sent, against the same chain with it off
(no OTEL_* variables: no SDK, the API's no-op spans).

On and off are separate processes (a process's tracer is set up once):
phases alternate, off, on, off, on..., each with a worker of its own (with
Redis and PostgreSQL one `celery -A zenweb worker` process, as the chain
row's; else the embedded layout's worker threads) and a driver that makes
the runs, tracing as the worker does (it plays the API, which makes the
run and its trace). Each phase times RUNS chains after a warm-up; the
overhead row holds each on phase's median wall over the off phase's just
before it, PAIRS times.
"""

from __future__ import annotations

import os
import statistics
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.chain import EMBEDDED_CONCURRENCY, LENGTH, run_to_end, workflow_yaml
from bench.common import Context, Result, Target, log_trouble, run_child, worker_processes

TARGET = Target("<=", 1.10, "<= 1.1x")
PAIRS = 6  # an off phase, then an on phase, this many times
RUNS = 3  # timed chains per phase, after a warm-up
# OTEL_PYTHON_DISABLED_INSTRUMENTATIONS for the on phases (ZENWEB_BENCH_TRACING_DISABLED, e.g. "psycopg").
DISABLED = os.environ.get("ZENWEB_BENCH_TRACING_DISABLED", "")
INSTRUMENTED = ", ".join(n for n in ("django", "celery", "psycopg") if n not in DISABLED.split(",")) or "none"


def drive(yaml_path: str, runs: int, embedded: bool = False) -> list[float]:
    """In a child process: a warm-up chain, then ``runs`` timed chains (seconds each)."""
    from runs.actions import do_register_workflow
    from zenweb import telemetry

    telemetry.setup()  # as daphne does: only with OTEL_* variables
    if embedded:
        from zenweb.embedded import start_worker_thread

        start_worker_thread(EMBEDDED_CONCURRENCY)
    workflow, _ = do_register_workflow(Path(yaml_path).read_text(), yaml_path)
    run_to_end(workflow)
    walls = [run_to_end(workflow) for _ in range(runs)]
    telemetry.flush()
    return walls


class _Sink(BaseHTTPRequestHandler):
    """Reads an OTLP export, counts it, answers 200 with an empty response."""

    received = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def measure(ctx: Context) -> list[Result]:
    yaml_path = ctx.tmp / "bench-tracing.yaml"
    yaml_path.write_text(workflow_yaml(LENGTH))
    embedded = bool(ctx.pg_problem or ctx.redis_problem)
    backend = ctx.sqlite() if embedded else ctx.postgres(redis=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    traced = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_SERVICE_NAME": "zenweb-bench",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": DISABLED,
    }
    phases: list[tuple[bool, list[float]]] = []
    trouble = ""
    try:
        for phase in range(2 * PAIRS):
            on = phase % 2 == 1
            env = backend.env | (traced if on else {})
            if embedded:
                phases.append(
                    (on, run_child("bench.tracing", "drive", env, yaml_path=str(yaml_path), runs=RUNS, embedded=True))
                )
                continue
            logs = ctx.tmp / "logs" / f"tracing-{phase}"
            with worker_processes("zenweb", 1, env, logs):
                phases.append((on, run_child("bench.tracing", "drive", env, yaml_path=str(yaml_path), runs=RUNS)))
            trouble = trouble or log_trouble(logs)
    finally:
        server.shutdown()
        server.server_close()
    layout = "embedded: memory broker + sqlite, 1 process" if embedded else "redis+postgresql, 1 worker"
    return _rows(layout, phases, _Sink.received, trouble)


def _rows(layout: str, phases: list[tuple[bool, list[float]]], exports: int, trouble: str) -> list[Result]:
    off = [walls for on, walls in phases if not on]
    on = [walls for on, walls in phases if on]
    # Each on phase over the off phase just before it: the machine's load drifts between pairs.
    ratios = [statistics.median(after) / statistics.median(before) for before, after in zip(off, on, strict=True)]
    disabled = f"; instrumentations off: {DISABLED}" if DISABLED else ""
    note = (
        f"chain of {LENGTH} steps, {len(off)} off/on pairs of phases, {RUNS} runs each; "
        f"each on phase's median over the off phase's before it; {exports} OTLP exports received{disabled}"
    )
    if trouble:
        note += f"; DISTURBED: {trouble}"

    def per_step(groups: list[list[float]]) -> list[float]:
        return [seconds * 1000 / LENGTH for walls in groups for seconds in walls]

    return [
        Result("tracing", f"chain {LENGTH} steps, tracing off, per step", layout, "ms", per_step(off), False),
        Result(
            "tracing",
            f"chain {LENGTH} steps, tracing on, per step",
            layout,
            "ms",
            per_step(on),
            higher_is_better=False,
            note=f"OTLP/HTTP to a receiver in the bench's process; instrumented: {INSTRUMENTED}",
        ),
        Result(
            "tracing",
            "tracing overhead: chain with tracing on / off",
            layout,
            "x",
            ratios,
            higher_is_better=False,
            target=TARGET,
            note=note,
        ),
    ]
