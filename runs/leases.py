"""Leases on step turns: one worker takes a turn at a time, and a turn whose
worker died is handed to another.

A worker claims a turn with a conditional UPDATE (the step is running, the
turn is the next one, and nobody holds an unexpired lease), has its
process's renewer thread renew the lease while its model thinks, and clears
it in the transaction that records the turn. The sweeper (runs/sweeper.py)
hands a turn whose lease expired to another worker, and sooner the turns
and tool calls of a worker known dead: a lease's owner names its process
(host, pid and start time), which beats while it holds leases; a process
of this machine whose pid is gone, or one elsewhere silent for four beats,
is dead (``dead_owners``).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import connection, models
from django.db.models import Q
from django.utils import timezone

from runs.models import Step, WorkerProcess
from runs.store.sql import store
from runs.store.sql.errors import connection_lost, first_line

log = logging.getLogger(__name__)


def worker_identity() -> str:
    """Which worker (host, process, thread) holds a lease: shown on the run
    page, ``host:pid@start:thread``. The process's start time (in clock
    ticks since boot, from /proc) tells it from a later process given the
    same pid: the sweeper then knows a lease's owner died (``dead_owners``)."""
    return f"{this_process()}:{threading.current_thread().name}"


def this_process() -> str:
    """This process's part of its lease owners: ``host:pid@start`` (``host:pid``
    where /proc cannot say when it started)."""
    pid = os.getpid()
    if _PROCESS.get("pid") != pid:  # first use, or a forked child
        started = _stat(pid)
        name = f"{socket.gethostname()}:{pid}" + (f"@{started[1]}" if started else "")
        _PROCESS.update(pid=pid, name=name)
    return _PROCESS["name"]


_PROCESS: dict = {}


def claim_turn(step_pk: int, turn: int, owner: str) -> Step | None:
    """Take the lease on turn ``turn`` of a step and return the step loaded
    for it (``sql.step_for_turn``), or None if the turn is not this
    worker's: stale, repeated, leased elsewhere, or its run stopped. One
    statement on PostgreSQL. Raises Step.DoesNotExist for a step that is gone."""
    now = timezone.now()
    expires = now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
    return store().claim_step_for_turn(step_pk, turn, owner, expires, now)


def claim(step_pk: int, turn: int, owner: str) -> bool:
    """Take the lease on turn ``turn`` of a step; False if another worker holds
    it (or the turn was taken already)."""
    now = timezone.now()
    return store().claim_step(step_pk, turn, owner, now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS), now)


def release(step_pk: int, owner: str) -> None:
    """Give up ``owner``'s lease on a step's turn (an attempt that stopped
    without recording it), so that the retry takes the turn at once instead
    of after the lease runs out."""
    Step.objects.filter(pk=step_pk, lease_owner=owner).update(lease_owner="", lease_expires=None)


def beat_unless_recent() -> None:
    """Beat now, in this thread, unless this process did within a heartbeat:
    before a tool call is claimed, so that a worker killed a moment after
    it took the call is known dead by its pid, not only by its lease (the
    renewer thread's first beat comes a moment later)."""
    if _RENEWALS.beat_is_stale():
        _RENEWALS.beat_now()


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
    """The leases this process holds, renewed by one thread, which also
    beats for the process while it holds any (``dead_owners``).

    A thread per turn cost a start and a join on every turn, though most
    turns end long before their first renewal is due. Here a turn only adds
    an entry; the thread sleeps until the earliest renewal is due and then
    renews every lease due within half an interval, one UPDATE per model.
    The first lease of an idle process has it beat at once, then every
    ZENWEB_HEARTBEAT_SECONDS until it holds none.
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
        # When this process beats next (while it holds a lease), and when it
        # last did (monotonic).
        self._beat_at = math.inf
        self._beaten_at = -math.inf

    def add(self, model: type[models.Model], pk: int, owner: str, every: float) -> int:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked worker child: a thread of its own
                self._due.clear()
                self._pid = os.getpid()
                threading.Thread(target=self._loop, name="zenweb-lease-renewer", daemon=True).start()
            key = next(self._ids)
            now = time.monotonic()
            at = now + every
            every_beat = settings.ZENWEB_HEARTBEAT_SECONDS
            if not self._due and every_beat > 0:
                # Its first lease since it was idle: it beats from now on, at
                # once unless it did within a heartbeat.
                self._beat_at = max(now, self._beaten_at + every_beat)
                at = min(at, self._beat_at)
            self._due[key] = (model, pk, owner, every, now + every)
            if at < self._wakes_at:
                self._wakes_at = at  # the thread's next wake-up, once it has it
                self._cond.notify()
            return key

    def after_fork(self) -> None:
        # A forked worker child has none of the parent's threads, and a lock
        # some thread held at the fork would stay held: start afresh.
        type(self).__init__(self)

    def remove(self, key: int) -> None:
        with self._cond:
            self._due.pop(key, None)

    def _loop(self) -> None:
        while True:
            with self._cond:
                batch, beats_now = self._wait_for_due()
            if beats_now:
                self.beat_now()
            if batch:
                self._renew(batch)

    def _wait_for_due(self) -> tuple[list[tuple[type[models.Model], int, str]], bool]:
        while True:
            now = time.monotonic()
            if not self._due:
                connection.close()
                self._wakes_at = self._beat_at = math.inf
                self._cond.wait()
                continue
            first = min(self._beat_at, min(entry[4] for entry in self._due.values()))
            if first > now:
                self._wakes_at = first
                self._cond.wait(first - now)
                continue
            beats_now = self._beat_at <= now
            if beats_now:
                self._beat_at = now + settings.ZENWEB_HEARTBEAT_SECONDS
            batch = []
            for key, (model, pk, owner, every, at) in self._due.items():
                if at <= now + every / 2:
                    batch.append((model, pk, owner))
                    self._due[key] = (model, pk, owner, every, now + every)
            return batch, beats_now

    def beat_is_stale(self) -> bool:
        every = settings.ZENWEB_HEARTBEAT_SECONDS
        return every > 0 and time.monotonic() - self._beaten_at > every

    def beat_now(self) -> None:
        try:
            store().beat(this_process(), this_machine())
            self._beaten_at = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - a missed beat is made up by the next
            if connection_lost(exc):
                log.warning("heartbeat: the database cannot be reached (%s)", first_line(exc))
            else:
                log.exception("heartbeat failed")
            connection.close()

    def _renew(self, batch: list[tuple[type[models.Model], int, str]]) -> None:
        expires = timezone.now() + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)
        by_model: dict[type[models.Model], Q] = {}
        for model, pk, owner in batch:
            by_model[model] = by_model.get(model, Q()) | Q(pk=pk, lease_owner=owner)
        for model, which in by_model.items():
            try:
                model._default_manager.filter(which).update(lease_expires=expires)
            except Exception as exc:  # noqa: BLE001 - a failed renewal only risks a duplicate attempt
                if connection_lost(exc):
                    name = model._meta.model_name
                    log.warning("renewing %s leases: the database cannot be reached (%s)", name, first_line(exc))
                else:
                    log.exception("renewing %s leases failed", model._meta.model_name)
                connection.close()  # the next renewal connects again


_RENEWALS = _Renewals()
os.register_at_fork(after_in_child=_RENEWALS.after_fork)


# -- Whether a lease's owner still lives --------------------------------------


def heartbeat_dead_after() -> float:
    """How long a process holding leases may go without a beat before it
    counts as dead: four beats, so that a beat or two lost with a database
    connection is no death."""
    return 4 * settings.ZENWEB_HEARTBEAT_SECONDS


def dead_owners(beats_trusted: Callable[[], bool]) -> tuple[list[str], list[str]]:
    """The processes (``this_process`` names) whose leases are lost with
    them: those of this machine whose pid is gone (or is another process
    now: its start time differs), known at once; and those elsewhere whose
    beat is older than ``heartbeat_dead_after()``, if ``beats_trusted()``
    (asked only then: the database and this sweeper have been up long
    enough for every live process to have beaten since). One statement."""
    here = this_machine()
    me = this_process()
    gone, silent = [], []
    for name, machine, age in store().beats():
        if name == me:
            continue
        if here and machine == here:
            if not _lives(name):
                gone.append(name)
        elif settings.ZENWEB_HEARTBEAT_SECONDS > 0 and age > heartbeat_dead_after():
            silent.append(name)
    if silent and not beats_trusted():
        silent = []
    return gone, silent


def forget(names: list[str]) -> None:
    """Drop the rows of processes whose leases were handed on."""
    if names:
        WorkerProcess.objects.filter(name__in=names).delete()


@functools.cache
def this_machine() -> str:
    """Where this process's pids mean something: the kernel's boot and this
    process's pid namespace (containers on one host share the one, not the
    other). "" where /proc cannot say, or is another namespace's."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            booted = boot.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        with open("/proc/self/stat") as own:
            mounted_for_us = own.read().split(" ", 1)[0] == str(os.getpid())
    except OSError:
        return ""
    return f"{booted}/{namespace}" if mounted_for_us else ""


def _lives(name: str) -> bool:
    """Whether process ``name`` (``host:pid@start``) of this machine still
    runs: its pid there, not a zombie, started when its name says."""
    pid, _, started = name.rpartition(":")[2].partition("@")
    if not pid.isdigit() or not started:
        return True  # cannot tell: its lease decides
    found = _stat(int(pid))
    if found is None:
        # Not in /proc: gone, unless /proc hides other users' processes
        # (mounted with hidepid) and it runs as another user.
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True  # there, its start time unseen: its lease decides
    return found[0] not in ("Z", "X") and found[1] == started


def _stat(pid: int) -> tuple[str, str] | None:
    """A process's state and start time (clock ticks since boot), from
    /proc/<pid>/stat; None if there is no such process or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode(errors="replace")
    except OSError:
        return None
    # Fields 3 on, after the command's name, which may hold spaces and parentheses.
    fields = text[text.rfind(")") + 2 :].split()
    return (fields[0], fields[19]) if len(fields) > 19 else None
