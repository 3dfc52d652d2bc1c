"""Requests for a person to allow destructive work, and their decisions."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.models.runs import Run
from runs.models.tools import ToolCall


class Approval(models.Model):
    """A request for a person to allow destructive work: a whole workflow run,
    or one tool call on the workflow's approval list. The decision covers
    exactly ``arguments`` (by hash): changed arguments need a new approval.

    A ``question`` is a step's ask_person call waiting for a person's answer
    (``arguments``: the question and its options): it is answered, not
    approved (``answered``, the answer in its one decision), or it lapses."""

    class Kind(models.TextChoices):
        WORKFLOW = "workflow"
        TOOL = "tool"
        QUESTION = "question"
        # A tool a coordinator created (CreatedTool): approved, later runs may use it.
        NEW_TOOL = "new_tool"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        LAPSED = "lapsed"
        ANSWERED = "answered"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    step_id = models.CharField(max_length=200, blank=True)
    tool_call = models.OneToOneField(ToolCall, null=True, blank=True, on_delete=models.CASCADE, related_name="approval")
    what = models.TextField()
    why = models.TextField()
    arguments = models.JSONField(default=dict)
    # A workflow's: the calls with effects its steps will make, as shown to
    # the approver (agent, tool, arguments; ``at_run_time`` for those a model
    # or message fills in, which ask again). Covered by ``arguments_hash``.
    actions = models.JSONField(default=list, blank=True)
    arguments_hash = models.CharField(max_length=64)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_requests"
    )
    required_approvals = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    reason = models.TextField(blank=True, help_text="Why it was rejected or lapsed.")
    expires_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # Set once, by whoever claims the approved work: it never runs twice.
    executed = models.BooleanField(default=False)
    # Set once, by the task that emails its approvers: a redelivered task sends none again.
    emailed_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created"]
        permissions = [("decide_approval", "Can approve or reject destructive work")]

    def __str__(self) -> str:
        return f"approval {self.pk}: {self.what[:60]}"


class ApprovalDecision(models.Model):
    """One person's decision on an approval, with the arguments they saw;
    on a question, the answer (``reason``) and who gave it."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"
        ANSWER = "answer"

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_decisions")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField()
    arguments_hash = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["approval", "user"], name="one_decision_per_person")]
        ordering = ["id"]
