"""Holding a command's answer while its run is under way (`?wait=N`): the
command's result is read again every POLL_SECONDS until its status is final
or the seconds have passed."""

from __future__ import annotations

import time

from agents.handler import FINAL_STATUSES, CoordinatorResult
from runs.actions.command_results import command_result
from runs.models import Command
from runs.store.sql import store

POLL_SECONDS = 0.25


def result_within(command: Command, seconds: int) -> CoordinatorResult:
    """``command``'s result, once final or after ``seconds``, whichever is first."""
    deadline = time.monotonic() + seconds
    result = command_result(command)
    while result.status not in FINAL_STATUSES and time.monotonic() < deadline:
        store().release_while_waiting()
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        command.refresh_from_db(fields=["result", "status"])
        if command.run is not None:
            command.run.refresh_from_db()
        result = command_result(command)
    return result
