"""Tools a coordinator created in a run (create_tool), registered for later
runs once a person approved them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.models.approvals import Approval
from runs.models.runs import Run


class CreatedTool(models.Model):
    """A tool's spec (agents.tools.builtin.created.ToolSpec), the output of
    its example's run, who created it and whether a person approved it.
    Only an approved one is offered to agents that list its name; one name
    is held by at most one pending or approved tool."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        LAPSED = "lapsed"
        # Approved, then withdrawn by staff (the admin): no agent gets it any more.
        WITHDRAWN = "withdrawn"

    name = models.CharField(max_length=64, db_index=True)
    spec = models.JSONField(help_text="The tool as create_tool was given it (ToolSpec data).")
    example_exit_code = models.IntegerField()
    example_output = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    # Who created it: the run whose coordinator called create_tool, and who started that run.
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tools")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tools"
    )
    tool_call_id = models.CharField(max_length=200, blank=True)
    approval = models.OneToOneField(
        Approval, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tool"
    )
    created = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name", "-created"]

    # The rows that hold their name: approved, or waiting on an approval
    # that still exists (purge_runs deletes a run's approvals with it).
    HOLDS_NAME = models.Q(status=Status.APPROVED) | models.Q(status=Status.PENDING, approval__isnull=False)

    def __str__(self) -> str:
        return f"tool {self.name} ({self.status})"
