"""The embedded launcher: one process running daphne and a Celery worker.

The worker runs in a thread on the memory broker (see settings), so a fresh
clone needs no Redis, no PostgreSQL and no second terminal.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from django.conf import settings

log = logging.getLogger(__name__)


def start_worker_thread(concurrency: int | None = None) -> threading.Thread:
    """Start an in-process Celery worker consuming this process's broker."""
    from zenweb.celery import app
    from zenweb.workers import start_worker_thread as start

    return start(app, concurrency or settings.ZENWEB_EMBEDDED_CONCURRENCY, name="celery-embedded")


def resume_interrupted_runs(out) -> None:
    """Runs that were live when this process last stopped go on (their
    queued tasks were in its memory broker). Writes how many to ``out``."""
    from runs.actions.recovery import do_resume_after_restart

    if settings.EMBEDDED and (runs := do_resume_after_restart()):
        out.write(f"resumed {len(runs)} run(s) that were live when zenweb last stopped")


def check_address(host: str, port: int) -> None:
    """Raise OSError if ``host``:``port`` cannot be listened on now (another
    process listens there, or the address is not this machine's): before
    anything starts, rather than after the demo runs did. Bound as Twisted
    binds (SO_REUSEADDR), so a port a stopped server left in TIME_WAIT passes."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)


def serve(host: str, port: int, listening: Callable[[], None]) -> None:
    """Serve HTTP and websockets with daphne until interrupted; call
    ``listening`` once it listens. Raises OSError if it could not (the port
    taken since check_address: daphne logs why)."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    from zenweb.asgi import application

    ready: list[bool] = []

    def on_ready() -> None:
        ready.append(True)
        listening()

    Server(
        application,
        endpoints=build_endpoint_description_strings(host=host, port=port),
        signal_handlers=True,
        verbosity=0,
        # daphne calls it once its endpoint listens, and never if it cannot.
        ready_callable=on_ready,
    ).run()
    if not ready:
        raise OSError(f"could not listen on {host}:{port}")
