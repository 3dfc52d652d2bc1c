"""CPU time spent by processes, read from Linux's /proc: what a run cost the
worker processes (a worker and its prefork children) and the PostgreSQL
backends that served it, whatever else the machine did meanwhile. On a
machine bound by its CPU, a wall follows the CPU spent; these say by whom.

Elsewhere (no /proc), every reading is None and the rows say so.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds: user + system) of ``pid``; None if gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces: fields follow its ")".
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def tree_seconds(roots: Iterable[int]) -> float | None:
    """CPU seconds of ``roots`` and every process descended from them
    (living ones: a child that has exited is counted in its parent only
    once the parent has waited for it). None without /proc."""
    if not PROC.is_dir():
        return None
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                parents[int(entry.name)], seconds[int(entry.name)] = stat
    wanted = set(roots)
    counted = 0.0
    for pid, spent in seconds.items():
        ancestor = pid
        while ancestor and ancestor not in wanted:
            ancestor = parents.get(ancestor, 0)
        if ancestor:
            counted += spent
    return counted


def seconds_by_pid(pids: Iterable[int]) -> dict[int, float] | None:
    """CPU seconds of each of ``pids`` still there. None without /proc."""
    if not PROC.is_dir():
        return None
    stats = {pid: _stat(pid) for pid in pids}
    return {pid: stat[1] for pid, stat in stats.items() if stat is not None}


def seconds_of(pids: Iterable[int]) -> float | None:
    """CPU seconds of exactly ``pids`` (those still there). None without /proc."""
    seconds = seconds_by_pid(pids)
    return None if seconds is None else sum(seconds.values())
