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
from runs.store.sql.base import Statements
from runs.store.sql.rows import table


class Beat(NamedTuple):
    name: str
    machine: str
    # Seconds since the process last beat.
    age: float


class WorkerStatements(Statements):
    def beat(self, name: str, machine: str) -> None:
        """Say that process ``name`` (on ``machine``) lives: its row, made or renewed."""
        WorkerProcess.objects.update_or_create(name=name, defaults={"machine": machine, "beat": timezone.now()})

    def beats(self) -> list[Beat]:
        """Every process's row, with how long ago it last beat."""
        now = timezone.now()
        rows = WorkerProcess.objects.values_list("name", "machine", "beat")
        return [Beat(name, machine, (now - at).total_seconds()) for name, machine, at in rows]


@functools.cache
def beat_sql() -> str:
    return (
        f"INSERT INTO {table(WorkerProcess)} (name, machine, beat, started)"
        " VALUES (%(name)s, %(machine)s, now(), now())"
        " ON CONFLICT (name) DO UPDATE SET beat = now(), machine = EXCLUDED.machine"
    )


@functools.cache
def beats_sql() -> str:
    return f"SELECT name, machine, extract(epoch FROM now() - beat)::float8 FROM {table(WorkerProcess)}"
