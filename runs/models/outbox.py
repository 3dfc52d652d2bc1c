"""Tasks to send again: their publish failed after their transaction committed."""

from __future__ import annotations

from django.db import models


class UnsentTask(models.Model):
    """A task whose publish failed after its transaction committed (the
    broker was away): the sweeper sends it again, oldest first, and deletes
    it once sent (runs/outbox.py). Every task is safe to run twice."""

    name = models.CharField(max_length=200)
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    error = models.CharField(max_length=300, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name}{tuple(self.args)}"
