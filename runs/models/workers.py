"""The worker processes that hold leases, and when each last said it lives."""

from __future__ import annotations

from django.db import models


class WorkerProcess(models.Model):
    """A process that runs tasks, and its heartbeat (runs/workers.py).

    ``name`` is the process part of the lease owners it writes
    (``host:pid@start``); ``machine`` says where its pid means something (the
    boot and the pid namespace), so that a sweeper there can ask the kernel
    whether it still runs; ``beat`` is renewed every
    ZENWEB_HEARTBEAT_SECONDS by the process itself, by the database's clock
    on PostgreSQL. A process found dead has its leases released and its row
    deleted."""

    name = models.CharField(max_length=200, unique=True)
    machine = models.CharField(max_length=200, blank=True)
    beat = models.DateTimeField()
    started = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name
