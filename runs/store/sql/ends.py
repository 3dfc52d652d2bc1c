"""What a run that ends may leave open (runs/actions/ending.py closes it)."""

from __future__ import annotations

import functools
from typing import NamedTuple

from runs.models import Approval, Command, Run, Step, ToolCall, ToolExecution
from runs.store.rows import plain_cursor, table


class LeftOpen(NamedTuple):
    """What a run that ends may leave open, each one whether it does."""

    calls: bool  # tool calls queued or running
    executions: bool  # tool executions running (runs/journal.py)
    approvals: bool  # approvals pending
    children: bool  # child runs its calls started, not ended
    command: bool  # the command that started it, whose result is written at the end


def left_open(run_id: int) -> LeftOpen:
    """What run ``run_id`` leaves open, in one query: most runs leave
    nothing, and each of these was a query of its own at every run's end."""
    params = {
        "run": run_id,
        "queued": ToolCall.Status.QUEUED,
        "running": ToolCall.Status.RUNNING,
        "executing": ToolExecution.Status.RUNNING,
        "pending": Approval.Status.PENDING,
        **{f"ended_{n}": status for n, status in enumerate(sorted(Run.TERMINAL))},
    }
    with plain_cursor() as cursor:
        cursor.execute(_left_open_sql(), params)
        return LeftOpen(*(bool(flag) for flag in cursor.fetchone()))


@functools.cache
def _left_open_sql() -> str:
    ended = ", ".join(f"%(ended_{n})s" for n in range(len(Run.TERMINAL)))
    return (
        f"SELECT EXISTS(SELECT 1 FROM {table(ToolCall)} c WHERE c.run_id = %(run)s "
        "AND c.status IN (%(queued)s, %(running)s)), "
        f"EXISTS(SELECT 1 FROM {table(ToolExecution)} x JOIN {table(Step)} s ON s.id = x.step_id "
        "WHERE s.run_id = %(run)s AND x.status = %(executing)s), "
        f"EXISTS(SELECT 1 FROM {table(Approval)} a WHERE a.run_id = %(run)s AND a.status = %(pending)s), "
        f"EXISTS(SELECT 1 FROM {table(Run)} child JOIN {table(ToolCall)} t ON t.id = child.parent_tool_call_id "
        f"WHERE t.run_id = %(run)s AND child.status NOT IN ({ended})), "
        f"EXISTS(SELECT 1 FROM {table(Command)} k WHERE k.run_id = %(run)s)"
    )
