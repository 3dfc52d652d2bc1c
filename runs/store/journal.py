"""The tool journal on the database (agents.runner.JournalWriter): each write
commits at once, outside the turn's transaction, so it survives a worker that
dies before the turn is recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError, connection
from django.db.models import F
from django.utils import timezone

from agents.tools.registry import ToolOutcome
from agents.tools.results import Artifact, Bounds
from runs.models import ToolExecution
from runs.store.sql.errors import connection_lost

log = logging.getLogger(__name__)


class DjangoToolJournal:
    """The journal of step ``step_pk``'s tool calls, run by worker ``owner``.
    ``outside_transaction``: its writes commit at once, so a finished call's
    outcome waits out a lost connection (``_until_stored``); False for a
    journal used inside a caller's transaction, whose rollback already lost
    the rest: the error is raised."""

    def __init__(self, step_pk: int, owner: str, *, outside_transaction: bool) -> None:
        self.step_pk = step_pk
        self.owner = owner
        self.outside_transaction = outside_transaction

    def get(self, key: str) -> ToolOutcome | None:
        outcome = (
            ToolExecution.objects.filter(step_id=self.step_pk, key=key, status=ToolExecution.Status.DONE)
            .values_list("outcome", flat=True)
            .first()
        )
        return _load(outcome) if outcome is not None else None

    def begin(self, key: str, name: str) -> None:
        execution, created = ToolExecution.objects.get_or_create(
            step_id=self.step_pk, key=key, defaults={"name": name, "owner": self.owner}
        )
        if not created:
            # An attempt whose worker died mid-call (or a resumed run's): this one runs it again.
            ToolExecution.objects.filter(pk=execution.pk).update(
                owner=self.owner, attempts=F("attempts") + 1, status=ToolExecution.Status.RUNNING
            )

    def finish(self, key: str, outcome: ToolOutcome) -> None:
        data = _dump(outcome)
        _until_stored(
            lambda: ToolExecution.objects.filter(step_id=self.step_pk, key=key).update(
                status=ToolExecution.Status.DONE, outcome=data, finished=timezone.now()
            ),
            retry=self.outside_transaction,
        )


# How long a finished call's outcome waits for a lost database connection
# (about 16 s in all) before its task gives up and is retried.
STORE_RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0)


def _until_stored(write: Callable[[], object], *, retry: bool) -> None:
    """Write what a side effect returned. It happened: if the connection is
    lost now, a retry of the task would run it again, so wait for the
    database instead (``retry``: outside a transaction only; inside one, the
    rollback already lost the rest)."""
    for delay in STORE_RETRY_DELAYS:
        try:
            write()
            return
        except (OperationalError, InterfaceError) as exc:
            if not retry or not connection_lost(exc):
                raise
            log.warning("storing a tool outcome failed (%s); trying again in %gs", exc, delay)
            connection.close()
            time.sleep(delay)
    write()


def _dump(outcome: ToolOutcome) -> dict[str, Any]:
    return {
        "text": outcome.text,
        "ok": outcome.ok,
        "arguments": outcome.arguments,
        "error_kind": outcome.error_kind,
        "bounds": outcome.bounds.as_data() if outcome.bounds else None,
        "artifacts": [a.as_data() for a in outcome.artifacts],
        "omitted": outcome.omitted,
        "counted": outcome.counted,
    }


def _load(data: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        data["text"],
        ok=data["ok"],
        arguments=data["arguments"],
        error_kind=data["error_kind"],
        bounds=Bounds(**data["bounds"]) if data["bounds"] else None,
        artifacts=[Artifact(**artifact) for artifact in data["artifacts"]],
        omitted=data["omitted"],
        counted=data["counted"],
    )
