"""The Celery app. Settings come from Django's settings, CELERY_* names."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")

app = Celery("zenweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


# Every worker sweeps for turns whose worker died (see runs/leases.py).
_sweepers: dict[int, object] = {}


@worker_ready.connect
def _start_sweeper(sender=None, **kwargs) -> None:
    from django.conf import settings

    if settings.ZENWEB_SWEEP_SECONDS > 0:
        from runs.leases import Sweeper

        # The sender is the worker's consumer; shutdown is sent by its controller.
        _sweepers[id(getattr(sender, "controller", sender))] = Sweeper().start()


@worker_shutdown.connect
def _stop_sweeper(sender=None, **kwargs) -> None:
    sweeper = _sweepers.pop(id(sender), None)
    if sweeper is not None:
        sweeper.stop()
