"""Leases on step turns: one worker takes a turn at a time, and a turn whose
worker died is handed to another.

A worker claims a turn with a conditional UPDATE (the step is running, the
turn is the next one, and nobody holds an unexpired lease), has its
process's renewer thread renew the lease while its model thinks, and clears
it in the transaction that records the turn. The sweeper (runs/sweeper.py)
hands a turn whose lease expired to another worker.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone

from runs.models import Step
from runs.store import sql
from runs.store.sql.errors import connection_lost, first_line

log = logging.getLogger(__name__)


def worker_identity() -> str:
    """Which worker (host, process, thread) holds a lease: shown on the run page."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


def claim_turn(step_pk: int, turn: int, owner: str) -> Step | None:
    """Take the lease on turn ``turn`` of a step and return the step loaded
    for it (``sql.step_for_turn``), or None if the turn is not this
    worker's: stale, repeated, leased elsewhere, or its run stopped. One
    statement on PostgreSQL. Raises Step.DoesNotExist for a step that is gone."""
    now = timezone.now()
    expires = now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    return sql.claim_step_for_turn(step_pk, turn, owner, expires, now)


def claim(step_pk: int, turn: int, owner: str) -> bool:
    """Take the lease on turn ``turn`` of a step; False if another worker holds
    it (or the turn was taken already)."""
    now = timezone.now()
    return sql.claim_step(step_pk, turn, owner, now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS), now)


def release(step_pk: int, owner: str) -> None:
    """Give up ``owner``'s lease on a step's turn (an attempt that stopped
    without recording it), so that the retry takes the turn at once instead
    of after the lease runs out."""
    Step.objects.filter(pk=step_pk, lease_owner=owner).update(lease_owner="", lease_expires=None)


@contextmanager
def renewing(pk: int, owner: str, model: type[models.Model] = Step) -> Iterator[None]:
    """Keep the lease on a step's turn (or a tool call, ``model=ToolCall``)
    alive while the body runs: a model or a tool can take long."""
    every = max(0.05, settings.ZENWEB_LEASE_SECONDS / 3)
    key = _RENEWALS.add(model, pk, owner, every)
    try:
        yield
    finally:
        _RENEWALS.remove(key)


class _Renewals:
    """The leases this process holds, renewed by one thread.

    A thread per turn cost a start and a join on every turn, though most
    turns end long before their first renewal is due. Here a turn only adds
    an entry; the thread sleeps until the earliest renewal is due and then
    renews every lease due within half an interval, one UPDATE per model.
    Idle, it closes its database connection (a test database can then be
    dropped, and a worker holds no connection it does not use)."""

    def __init__(self) -> None:
        self._due: dict[int, tuple[type[models.Model], int, str, float, float]] = {}
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._pid = 0
        # When the thread wakes next by itself (inf: only when notified). A
        # new lease due later needs no wake-up: a turn notified the thread
        # every time, a switch of threads for the many turns that end in
        # milliseconds.
        self._wakes_at = math.inf

    def add(self, model: type[models.Model], pk: int, owner: str, every: float) -> int:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked worker child: a thread of its own
                self._due.clear()
                self._pid = os.getpid()
                threading.Thread(target=self._loop, name="zenweb-lease-renewer", daemon=True).start()
            key = next(self._ids)
            at = time.monotonic() + every
            self._due[key] = (model, pk, owner, every, at)
            if at < self._wakes_at:
                self._wakes_at = at  # the thread's next wake-up, once it has it
                self._cond.notify()
            return key

    def after_fork(self) -> None:
        # A forked worker child has none of the parent's threads, and a lock
        # some thread held at the fork would stay held: start afresh.
        self.__init__()

    def remove(self, key: int) -> None:
        with self._cond:
            self._due.pop(key, None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch = self._wait_for_due()
            self._renew(batch)

    def _wait_for_due(self) -> list[tuple[type[models.Model], int, str]]:
        while True:
            now = time.monotonic()
            if not self._due:
                connection.close()
                self._wakes_at = math.inf
                self._cond.wait()
                continue
            first = min(entry[4] for entry in self._due.values())
            if first > now:
                self._wakes_at = first
                self._cond.wait(first - now)
                continue
            batch = []
            for key, (model, pk, owner, every, at) in self._due.items():
                if at <= now + every / 2:
                    batch.append((model, pk, owner))
                    self._due[key] = (model, pk, owner, every, now + every)
            return batch

    def _renew(self, batch: list[tuple[type[models.Model], int, str]]) -> None:
        expires = timezone.now() + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
        by_model: dict[type[models.Model], Q] = {}
        for model, pk, owner in batch:
            by_model[model] = by_model.get(model, Q()) | Q(pk=pk, lease_owner=owner)
        for model, which in by_model.items():
            try:
                model.objects.filter(which).update(lease_expires=expires)
            except Exception as exc:  # noqa: BLE001 - a failed renewal only risks a duplicate attempt
                if connection_lost(exc):
                    name = model._meta.model_name
                    log.warning("renewing %s leases: the database cannot be reached (%s)", name, first_line(exc))
                else:
                    log.exception("renewing %s leases failed", model._meta.model_name)
                connection.close()  # the next renewal connects again


_RENEWALS = _Renewals()
os.register_at_fork(after_in_child=_RENEWALS.after_fork)
