"""What happened in a run: the messages between its steps, and its events."""

from __future__ import annotations

from django.db import models

from runs.models.runs import Run


class Message(models.Model):
    """One mailbox entry. A message that could not be delivered is kept too,
    with the reason it was dropped, so the dashboard can show it."""

    # Indexed by message_run_message_id and message_mailbox, which lead with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages", db_index=False)
    message_id = models.CharField(max_length=40)
    sender = models.CharField(max_length=200)
    recipient = models.CharField(max_length=200)
    type = models.CharField(max_length=20)
    content = models.TextField()
    created = models.DateTimeField(auto_now_add=True)
    drained = models.DateTimeField(null=True, blank=True)
    drop_reason = models.CharField(max_length=40, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "message_id"], name="message_run_message_id")]
        indexes = [models.Index(fields=["run", "recipient", "drained"], name="message_mailbox")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.message_id} {self.sender} -> {self.recipient}"


class Event(models.Model):
    # Indexed by event_run_seq (run, seq), which leads with it.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40)
    step_id = models.CharField(max_length=200, blank=True)
    data = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_run_seq")]
        ordering = ["run", "seq"]

    def __str__(self) -> str:
        return f"#{self.seq} {self.type}"
