"""A tool call's writes through the ORM, each named for what it does: its
lease taken, given back, expired, its result stored and delivered, what it
made linked to it (a child run, an approval, its artifacts), the journal
rows of a run that ends."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F, Q

from runs.models import Approval, Artifact, Run, ToolCall, ToolExecution
from runs.store.sql.base import Statements


class ToolCallWrites(Statements):
    def claim_call(self, call_pk: int, owner: str, now: datetime, expires: datetime) -> bool:
        """queued -> running under ``owner``'s lease until ``expires``, one
        more attempt: whether this worker took it."""
        queued = ToolCall.objects.filter(pk=call_pk, status=ToolCall.Status.QUEUED)
        changed = queued.update(
            status=ToolCall.Status.RUNNING,
            attempts=F("attempts") + 1,
            lease_owner=owner,
            lease_expires=expires,
            started=now,
        )
        return bool(changed)

    def requeue_call(self, call_pk: int, owner: str) -> None:
        """Call ``call_pk``, running under ``owner``'s lease, queued again;
        the attempt it stopped does not count."""
        ToolCall.objects.filter(pk=call_pk, status=ToolCall.Status.RUNNING, lease_owner=owner).update(
            status=ToolCall.Status.QUEUED, lease_owner="", lease_expires=None, attempts=F("attempts") - 1
        )

    def finish_call(self, call_pk: int, owner: str, values: dict, now: datetime) -> bool:
        """What call ``call_pk`` returned (``values``: field -> value), its
        lease given back, finished at ``now``: only if it still runs under
        ``owner``'s lease. Whether it did."""
        running = ToolCall.objects.filter(pk=call_pk, status=ToolCall.Status.RUNNING, lease_owner=owner)
        return bool(running.update(**values, lease_owner="", lease_expires=None, finished=now))

    def expire_call_lease(self, call: ToolCall, *, requeue: bool) -> bool:
        """``call``'s lease, expired, taken from it (and with ``requeue`` the
        call queued again), unless it was renewed or taken since ``call`` was
        read. Whether it was."""
        held = Q(pk=call.pk, status=ToolCall.Status.RUNNING, lease_owner=call.lease_owner)
        held &= Q(lease_expires=call.lease_expires)
        values: dict = {"lease_owner": "", "lease_expires": None}
        if requeue:
            values["status"] = ToolCall.Status.QUEUED
        return bool(ToolCall.objects.filter(held).update(**values))

    def close_call_lease(self, call_pk: int, now: datetime) -> None:
        """Call ``call_pk`` has no lease and finished at ``now`` (its result
        is delivered after)."""
        ToolCall.objects.filter(pk=call_pk).update(lease_owner="", lease_expires=None, finished=now)

    def deliver_call_result(self, call_pk: int, values: dict) -> bool:
        """Call ``call_pk``'s late result (``values``: field -> value), unless
        it had one already: whether this stored it."""
        return bool(ToolCall.objects.filter(pk=call_pk, status__in=ToolCall.PENDING).update(**values))

    def set_call_bounds(self, call_pk: int, bounds: dict | None) -> None:
        """Which bounds call ``call_pk``'s outcome met (an approved call's, run late)."""
        ToolCall.objects.filter(pk=call_pk).update(bounds=bounds)

    def link_to_call(self, call: ToolCall, *, child_run_id: int | None, approval_id: int | None) -> None:
        """The child run and the approval a call made, linked to its row."""
        if child_run_id:
            Run.objects.filter(pk=child_run_id).update(parent_tool_call=call)
        if approval_id:
            Approval.objects.filter(pk=approval_id).update(tool_call=call)

    def add_artifacts(self, artifacts: list[Artifact]) -> None:
        """What tool calls produced for people (new Artifact rows)."""
        if artifacts:
            Artifact.objects.bulk_create(artifacts)

    def cancel_running_executions(self, run_id: int, now: datetime) -> None:
        """The journal rows of run ``run_id``'s calls still running, cancelled at ``now``."""
        ToolExecution.objects.filter(step__run_id=run_id, status=ToolExecution.Status.RUNNING).update(
            status=ToolExecution.Status.CANCELLED, finished=now
        )
