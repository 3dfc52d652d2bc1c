"""The writes of the records around runs through the ORM, each named for
what it does: approvals and their decisions, commands, workflow versions,
claims, and the purge of ended runs."""

from __future__ import annotations

from django.utils import timezone

from runs.models import Approval, ApprovalDecision, Claim, Command, CreatedTool, Event, Message, Run, Workflow
from runs.store.sql.base import Statements


class RecordWrites(Statements):
    def create_approval(self, values: dict) -> Approval:
        """A pending approval (``values``: field -> value)."""
        return Approval.objects.create(**values)

    def add_approval_decision(self, values: dict) -> ApprovalDecision:
        """One person's decision on an approval (``values``: field -> value)."""
        return ApprovalDecision.objects.create(**values)

    def settle_approval(self, approval: Approval, status: str, reason: str) -> None:
        """How ``approval`` ended (``status``, and ``reason`` for a rejection
        or lapse), decided now: set on it and written."""
        approval.status, approval.reason, approval.decided_at = status, reason, timezone.now()
        approval.save(update_fields=["status", "reason", "decided_at"])

    def mark_approval_executed(self, approval_pk: int, *, only_approved: bool = False) -> bool:
        """What approval ``approval_pk`` allowed has been done (or is being
        done now); ``only_approved``: only if it is approved and was not
        executed yet, once. Whether this marked it."""
        rows = Approval.objects.filter(pk=approval_pk)
        if only_approved:
            rows = rows.filter(status=Approval.Status.APPROVED, executed=False)
        return bool(rows.update(executed=True))

    def mark_approval_emailed(self, approval_id: int) -> bool:
        """Approval ``approval_id``'s approvers are being emailed now, unless
        they were already: whether this call is the one to email them."""
        rows = Approval.objects.filter(pk=approval_id, emailed_at__isnull=True)
        return bool(rows.update(emailed_at=timezone.now()))

    def save_command(self, command: Command) -> None:
        """``command`` with its answer (its result and status): made, or written again."""
        command.save()

    def set_command_result(self, command: Command) -> None:
        """``command``'s result and status as set on it (its run's end)."""
        command.save(update_fields=["result", "status"])

    def create_workflow(self, values: dict) -> Workflow:
        """A workflow version (``values``: field -> value)."""
        return Workflow.objects.create(**values)

    def create_created_tool(self, values: dict) -> CreatedTool:
        """A tool a coordinator created, waiting for its approval (``values``: field -> value)."""
        return CreatedTool.objects.create(**values)

    def link_created_tool_approval(self, tool_pk: int, approval: Approval) -> None:
        """Created tool ``tool_pk`` is decided by ``approval``."""
        CreatedTool.objects.filter(pk=tool_pk).update(approval=approval)

    def settle_created_tool(self, tool: CreatedTool, status: str) -> None:
        """How a person decided on ``tool`` (``status``), decided now: set on it and written."""
        tool.status, tool.decided_at = status, timezone.now()
        tool.save(update_fields=["status", "decided_at"])

    def add_claim(self, values: dict) -> Claim:
        """A claim a step recorded, with its source (``values``: field -> value)."""
        return Claim.objects.create(**values)

    def delete_events(self, run_id: int, after: int, through: int) -> int:
        """Run ``run_id``'s events numbered past ``after`` through ``through``, deleted: how many."""
        return Event.objects.filter(run_id=run_id, seq__gt=after, seq__lte=through).delete()[0]

    def delete_runs(self, run_ids: list[int]) -> None:
        """Runs ``run_ids`` deleted, with their messages and what else they hold."""
        Message.objects.filter(run_id__in=run_ids).delete()
        Run.objects.filter(pk__in=run_ids).delete()
