"""A run's writes through the ORM, each named for what it does: the run
made, its status and result, its coordinator freed after a wake, its
wake's mark, the leases of the live runs handed back after a restart."""

from __future__ import annotations

from django.db.models import Q

from runs.models import Run, Step, ToolCall
from runs.store.sql.base import Statements


class RunWrites(Statements):
    def create_run(self, values: dict) -> Run:
        """A new run (``values``: field -> value)."""
        return Run.objects.create(**values)

    def set_run_status(self, run: Run, status: str, *, error: str | None = None) -> None:
        """``run``'s ``status`` (and ``error``, where given), set on it and written."""
        run.status = status
        fields = ["status"]
        if error is not None:
            run.error = error
            fields.append("error")
        Run.objects.filter(pk=run.pk).update(**{name: getattr(run, name) for name in fields})

    def approve_run_start(self, run_id: int) -> bool:
        """Run ``run_id``, awaiting the approval of its destructive work,
        approved and pending its start: whether this call moved it (once)."""
        moved = Run.objects.filter(pk=run_id, status=Run.Status.AWAITING_APPROVAL)
        return bool(moved.update(status=Run.Status.PENDING, destructive_approved=True))

    def set_run_result(self, run_id: int, result: str) -> None:
        """Run ``run_id``'s result, as its coordinator gave it."""
        Run.objects.filter(pk=run_id).update(result=result)

    def clear_wake_mark(self, run_id: int) -> None:
        """Run ``run_id``'s coordinator wake is no longer marked queued."""
        Run.objects.filter(pk=run_id, wake_queued__isnull=False).update(wake_queued=None)

    def release_coordinator(self, run_id: int, *, unless_asked_since: int | None = None) -> bool:
        """Run ``run_id``'s coordinator, busy with a wake, is idle again while
        the run runs; ``unless_asked_since``: only if its wake requests are
        still that count (none came during the wake). Whether it was freed."""
        if unless_asked_since is None:
            return bool(Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(coordinator_busy=False))
        return bool(Run.objects.filter(pk=run_id, wake_requests=unless_asked_since).update(coordinator_busy=False))

    def reset_coordinator(self, run_id: int) -> None:
        """Run ``run_id``'s coordinator neither busy nor marked for a wake: a
        wake that died with its worker, or a wake task the broker lost."""
        Run.objects.filter(pk=run_id).update(coordinator_busy=False, wake_queued=None)

    def hand_back_live_leases(self) -> None:
        """Every lease of the running runs' steps and tool calls given up,
        the running calls queued again: after a restart of the only worker."""
        live = Q(run__status=Run.Status.RUNNING)
        Step.objects.filter(live).exclude(lease_owner="").update(lease_owner="", lease_expires=None)
        ToolCall.objects.filter(live, status=ToolCall.Status.RUNNING).update(
            status=ToolCall.Status.QUEUED, lease_owner="", lease_expires=None
        )
