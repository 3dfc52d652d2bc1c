"""Starting Celery workers, for the embedded launcher, the services tests and
the bench: a worker in a thread of this process, or `celery worker`
processes (as the Procfile starts them) that are waited for until ready.

No Django here: bench/bare_celery.py starts its Django-free app with it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from celery import Celery


def start_worker_thread(app: Celery, concurrency: int, name: str = "celery-embedded") -> threading.Thread:
    """Start a threads-pool worker of ``app`` in this process, consuming its broker."""
    worker = app.Worker(
        pool="threads",
        concurrency=concurrency,
        loglevel="WARNING",
        # A worker in a thread must not take over stdout or the signals.
        redirect_stdouts=False,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        quiet=True,
    )
    thread = threading.Thread(target=worker.start, name=name, daemon=True)
    thread.start()
    return thread


# As the Procfile starts workers. Without mingle: zenweb revokes no task, and
# a worker's start waited about a second for its neighbours' revokes. Without
# gossip: nothing uses the other workers' events. Heartbeats stay, for monitors.
PROCFILE_FLAGS = ("--without-mingle", "--without-gossip")


class WorkerStartError(RuntimeError):
    """A worker process exited, or was not ready in time; ``log`` says why."""

    def __init__(self, log: Path) -> None:
        super().__init__(f"a worker did not start (log: {log})")
        self.log = log


@dataclass(frozen=True)
class WorkerOptions:
    """How each `celery worker` process runs: its pool and concurrency, how
    long it may take to say it is ready (checked every ``poll`` seconds),
    and how long it is given to stop before it is killed."""

    pool: str
    concurrency: int
    ready_timeout: float
    poll: float = 0.1
    stop_timeout: float = 30


@contextlib.contextmanager
def worker_processes(
    app: str,
    hostnames: Sequence[str],
    logs: Sequence[Path],
    *,
    env: Mapping[str, str],
    cwd: Path,
    options: WorkerOptions,
) -> Iterator[list[subprocess.Popen]]:
    """Start one `celery -A <app> worker` process per hostname, each writing
    to its log, wait until each says it is ready, and stop them afterwards
    (SIGTERM, then SIGKILL after ``options.stop_timeout`` seconds)."""
    processes: list[subprocess.Popen] = []
    try:
        for hostname, log in zip(hostnames, logs, strict=True):
            command = [sys.executable, "-m", "celery", "-A", app, "worker", "--pool", options.pool, *PROCFILE_FLAGS]
            command += ["--concurrency", str(options.concurrency), "--loglevel", "INFO", "--hostname", hostname]
            with open(log, "w") as out:
                processes.append(
                    subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
                )
        deadline = time.monotonic() + options.ready_timeout
        for process, log in zip(processes, logs, strict=True):
            while "ready." not in log.read_text():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise WorkerStartError(log)
                time.sleep(options.poll)
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=options.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
