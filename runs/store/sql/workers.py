"""The worker processes' heartbeats (runs/models/workers.py). On PostgreSQL
a beat is stamped, and its age read, by the database's clock: workers on
many machines are compared by one clock, not by their own, which may
disagree by more than a beat. SQLite is a file of one machine: its
processes share a clock."""

from __future__ import annotations

import functools
from typing import NamedTuple

from django.utils import timezone

from runs.models import WorkerProcess
from runs.store.sql.rows import database, plain_cursor, table


class Beat(NamedTuple):
    name: str
    machine: str
    # Seconds since the process last beat.
    age: float


def beat(name: str, machine: str) -> None:
    """Say that process ``name`` (on ``machine``) lives: its row, made or renewed."""
    if database().vendor != "postgresql":
        WorkerProcess.objects.update_or_create(name=name, defaults={"machine": machine, "beat": timezone.now()})
        return
    with plain_cursor() as cursor:
        cursor.execute(_beat_sql(), {"name": name, "machine": machine})


def beats() -> list[Beat]:
    """Every process's row, with how long ago it last beat."""
    if database().vendor != "postgresql":
        now = timezone.now()
        rows = WorkerProcess.objects.values_list("name", "machine", "beat")
        return [Beat(name, machine, (now - at).total_seconds()) for name, machine, at in rows]
    with plain_cursor() as cursor:
        cursor.execute(_beats_sql())
        return [Beat(*row) for row in cursor.fetchall()]


@functools.cache
def _beat_sql() -> str:
    return (
        f"INSERT INTO {table(WorkerProcess)} (name, machine, beat, started)"
        " VALUES (%(name)s, %(machine)s, now(), now())"
        " ON CONFLICT (name) DO UPDATE SET beat = now(), machine = EXCLUDED.machine"
    )


@functools.cache
def _beats_sql() -> str:
    return f"SELECT name, machine, extract(epoch FROM now() - beat)::float8 FROM {table(WorkerProcess)}"
