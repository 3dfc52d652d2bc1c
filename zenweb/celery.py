"""The Celery app. Settings come from Django's settings, CELERY_* names."""

from __future__ import annotations

import gc
import logging
import os
from typing import TYPE_CHECKING

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

if TYPE_CHECKING:
    from runs.sweeper import Sweeper

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")


# A task whose publish fails (the broker away) is kept for the sweeper to send again.
app = Celery("zenweb", task_cls="runs.outbox:RecordedTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Celery's Django fixup closes each worker thread's database connections
# before and after every task unless DB_REUSE_MAX is set: with PostgreSQL a
# new connection per task, several milliseconds of every step turn. Keep
# them, and let Django's own rules close them (CONN_MAX_AGE, a connection
# left unusable by an error) around each task, as around each request.
app.conf.CELERY_DB_REUSE_MAX = 2**62


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(**kwargs) -> None:
    from django.db import close_old_connections

    close_old_connections()


@worker_init.connect
def _set_up_tracing(**kwargs) -> None:
    # In the worker's main process, before the pool forks: the SDK's export
    # thread starts again in each child (docs/operations.md, "Traces").
    from zenweb import telemetry

    telemetry.setup()


@worker_process_shutdown.connect
@worker_shutdown.connect
def _export_held_spans(**kwargs) -> None:
    from zenweb import telemetry

    telemetry.flush()


@worker_init.connect
def _load_token_encodings(**kwargs) -> None:
    # In the worker's main process, before the pool forks: its processes
    # share the encodings instead of each loading its own on its first turn.
    from agents.llm import tokens

    tokens.preload([os.environ.get("ZENWEB_MODEL", "")])


@worker_init.connect
def _check_the_sandbox(**kwargs) -> None:
    # Once a worker: what the tool sandbox enforces here goes to the log,
    # and the cgroups of calls a dead worker left are removed.
    from django.conf import settings

    from agents.sandbox import at_start

    at_start(settings.ZENWEB_SANDBOX)


@worker_process_init.connect
def _freeze_startup_objects(**kwargs) -> None:
    # Django, Celery and zenweb's modules are loaded by now and live as long
    # as the process: out of the collector's reach, a full collection scans
    # only what tasks made (each scan of everything costs 80 ms, every few hundred turns).
    gc.freeze()


# Every worker sweeps for lost work (see runs/sweeper.py).
_sweepers: dict[int, Sweeper] = {}


@worker_ready.connect
def _start_sweeper(sender=None, **kwargs) -> None:
    from django.conf import settings

    if settings.ZENWEB_SWEEP_SECONDS > 0:
        from runs.sweeper import Sweeper

        # The sender is the worker's consumer; shutdown is sent by its controller.
        _sweepers[id(getattr(sender, "controller", sender))] = Sweeper().start()


@worker_ready.connect
def _say_how_disk_quotas_hold(**kwargs) -> None:
    # Where no workspace can have a file system of its own (not root, no
    # loop devices), the operator hears it once, when the worker starts.
    from django.conf import settings

    from agents import workspace_quota

    why = workspace_quota.checked_only(settings.ZENWEB_SANDBOX.workspace_fs)
    if why:
        logging.getLogger("zenweb.worker").warning(
            "workspace disk quotas are only checked every 0.5 s, not enforced by a file system: %s", why
        )


@worker_shutdown.connect
def _stop_sweeper(sender=None, **kwargs) -> None:
    sweeper = _sweepers.pop(id(sender), None)
    if sweeper is not None:
        sweeper.stop()
