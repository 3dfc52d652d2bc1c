"""The catalog: workflows as parsed from YAML, one row per version."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Workflow(models.Model):
    """One version of a catalog entry, parsed from YAML. Runs keep the version
    they started with, so a later edit never changes a past run."""

    name = models.CharField(max_length=64)
    version = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="File the entry was loaded from.")
    yaml_text = models.TextField()
    spec = models.JSONField(help_text="The validated workflow, as agents.spec.WorkflowSpec data.")
    # The tool name this workflow is offered under to other agents (agent-as-tool), if any.
    tool_name = models.CharField(max_length=64, blank=True, db_index=True)
    created = models.DateTimeField(auto_now_add=True)
    # A version a coordinator registered (create_workflow): its run, and who started that run.
    created_by_run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="created_workflows"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_workflows"
    )

    class Offer(models.TextChoices):
        """Whether people may start this version (runs/actions/offers.py
        start_refusal). Only the latest is offered by default: an older
        version may lack an approval gate its successor added."""

        LATEST = "latest", "while it is the latest version"
        ENABLED = "enabled", "re-enabled by staff, though older"
        RETIRED = "retired", "retired: never started"
        # `run_workflow FILE`: kept for the run it started, never offered
        # (nor counted as a name's latest version).
        AD_HOC = "ad_hoc", "ad hoc: stored for its run, never offered"

    offer = models.CharField(max_length=16, choices=Offer.choices, default=Offer.LATEST)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="workflow_name_version")]
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
