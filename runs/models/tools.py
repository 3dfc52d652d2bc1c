"""Tool calls and what they leave behind: the side-effect journal, artifacts
for people, and claims with their sources."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from runs.models.runs import Run, Step


class ToolCall(models.Model):
    """One tool call with the metadata its executor got (Goa-AI's names).

    ``arguments`` has injected fields masked; ``result`` is exactly what the
    model saw. A service-backed call runs as its own task: ``queued`` ->
    ``running`` (a worker holds its lease) -> ``done`` | ``failed`` |
    ``timed_out`` | ``cancelled`` (a cancel of its run or step stopped it, or
    kept it from running). ``waiting`` calls get their result from a child
    run or once a person decides."""

    class Status(models.TextChoices):
        DONE = "done"
        FAILED = "failed"
        TIMED_OUT = "timed_out"
        QUEUED = "queued"
        RUNNING = "running"
        # Its result comes later: from a child run, or once a person decides.
        WAITING = "waiting"
        # A person rejected the call.
        BLOCKED = "blocked"
        # A cancel of its run or its step stopped it (or kept it from running).
        CANCELLED = "cancelled"

    # The step takes its next turn once none of its calls is in one of these.
    PENDING = (Status.QUEUED, Status.RUNNING, Status.WAITING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls")
    # Indexed by toolcall_step_id (step, tool_call_id), which leads with it.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tool_calls", db_index=False)
    tool_call_id = models.CharField(max_length=100)
    session_id = models.CharField(max_length=240, blank=True)
    turn_id = models.CharField(max_length=240, blank=True)
    parent_tool_call_id = models.CharField(max_length=100, blank=True)
    name = models.CharField(max_length=100)
    arguments = models.TextField(blank=True)
    result = models.TextField(blank=True)
    ok = models.BooleanField(default=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DONE)
    error_kind = models.CharField(max_length=30, blank=True)
    bounds = models.JSONField(null=True, blank=True)
    omitted = models.BooleanField(default=False, help_text="The result was too large and the model got a preview.")
    # Bookkeeping calls (messaging) do not count against the run policy's caps.
    counted = models.BooleanField(default=True)
    duration_ms = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(auto_now_add=True)
    # Calls run as tasks: which worker runs it and until when (renewed while
    # it runs), how many attempts it took, and when it ran.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["step", "tool_call_id"], name="toolcall_step_id")]
        indexes = [models.Index(fields=["status", "lease_expires"], name="toolcall_status_lease")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.tool_call_id})"

    @property
    def bounds_label(self) -> str:
        """``50 of 1,234, truncated``: what the model got of the whole."""
        if not self.bounds:
            return ""
        returned = self.bounds.get("returned", 0)
        total = self.bounds.get("total")
        label = f"{returned:,} of {total:,}" if total is not None else f"{returned:,}"
        return f"{label}, truncated" if self.bounds.get("truncated") else label


class ToolExecution(models.Model):
    """The journal of side-effecting tool calls (files, shell): written in its
    own transaction before the turn is recorded, so a turn retried after its
    worker died finds finished calls here and does not run them again.
    ``running`` rows are calls whose worker died mid-way: those run again."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        # Its run ended while it ran: what it did is unknown, and nothing runs it again.
        CANCELLED = "cancelled"

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="tool_executions")
    key = models.CharField(max_length=64, help_text="The call's idempotency key.")
    name = models.CharField(max_length=100)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    outcome = models.JSONField(null=True, blank=True)
    owner = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveSmallIntegerField(default=1)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["step", "key"], name="toolexecution_step_key")]


class Artifact(models.Model):
    """Data a tool produced for people (a table, a chart, JSON): stored and
    shown on the run page, never sent to the model."""

    class Kind(models.TextChoices):
        TABLE = "table"
        TIMESERIES = "timeseries"
        JSON = "json"
        GRAPH = "graph"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    tool_call = models.ForeignKey(ToolCall, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    title = models.CharField(max_length=200, blank=True)
    audience = models.CharField(max_length=16, default="evidence")
    source_tool = models.CharField(max_length=200)
    data = models.JSONField()
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.title}".strip()


class Claim(models.Model):
    """A statement a run produced, with the source that backs it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="claims")
    step_id = models.CharField(max_length=200, blank=True)
    tool_call = models.ForeignKey(ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="claims")
    claim = models.TextField()
    confidence = models.FloatField()
    source_name = models.CharField(max_length=200, blank=True)
    source_domain = models.CharField(max_length=200, blank=True)
    url = models.TextField(blank=True)
    title = models.CharField(max_length=500, blank=True)
    source_type = models.CharField(max_length=40, blank=True)
    source_ref = models.CharField(max_length=500, blank=True)
    ttl = models.CharField(max_length=20, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.claim[:80]

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def link(self) -> str:
        """The source URL when it is http(s); anything else is never a link."""
        return self.url if self.url.lower().startswith(("http://", "https://")) else ""
