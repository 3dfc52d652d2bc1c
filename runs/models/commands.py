"""Free-text commands and the coordinator's answers to them."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.models.runs import Run


class Command(models.Model):
    """A free-text command and the coordinator's answer (COORDINATOR_RESULT).
    A command that selected a workflow has a run; others (unknown workflow,
    missing inputs, ambiguous, blocked by mode) have only the answer."""

    text = models.TextField()
    mode = models.CharField(max_length=8, choices=Run.Mode.choices, default=Run.Mode.CHAT)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="commands"
    )
    context = models.JSONField(
        null=True, blank=True, help_text="What the Executor said with it: goal_focus, workflow_hint, original_query."
    )
    selection = models.JSONField(null=True, blank=True, help_text="The COORDINATOR_SELECTION the model answered.")
    result = models.JSONField(null=True, blank=True, help_text="The COORDINATOR_RESULT, final once the run ends.")
    status = models.CharField(max_length=24, blank=True)
    compact_catalog = models.BooleanField(default=False, help_text="The catalog was too big and was sent compact.")
    run = models.OneToOneField(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="command_record")
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return self.text[:80]
