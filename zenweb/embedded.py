"""The embedded launcher: one process running daphne and a Celery worker.

The worker runs in a thread on the memory broker (see settings), so a fresh
clone needs no Redis, no PostgreSQL and no second terminal.
"""

from __future__ import annotations

import logging
import threading

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


def serve(host: str, port: int) -> None:
    """Serve HTTP and websockets with daphne until interrupted."""
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    from zenweb.asgi import application

    Server(
        application,
        endpoints=build_endpoint_description_strings(host=host, port=port),
        signal_handlers=True,
        verbosity=0,
    ).run()
