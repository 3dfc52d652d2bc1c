"""What zenweb stores: the catalog, runs, their steps, messages and events.

Every change to a run is written through runs/actions.py, which also writes
the Event that records it, in the same transaction.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents import ids


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

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="workflow_name_version")]
        ordering = ["name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Run(models.Model):
    class Status(models.TextChoices):
        # A destructive workflow waits for a person before it starts; a
        # rejected (or lapsed) request ends the run blocked.
        AWAITING_APPROVAL = "awaiting_approval"
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        PARTIAL = "partial"
        FAILED = "failed"
        CANCELLED = "cancelled"
        BLOCKED = "blocked"

    class Mode(models.TextChoices):
        CHAT = "chat"
        CODE = "code"

    TERMINAL = (Status.COMPLETED, Status.PARTIAL, Status.FAILED, Status.CANCELLED, Status.BLOCKED)

    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="runs")
    mode = models.CharField(max_length=8, choices=Mode.choices, default=Mode.CHAT)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    inputs = models.JSONField(default=dict, blank=True)
    command = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    result = models.TextField(blank=True, help_text="The coordinator's final summary.")
    error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Counters handed out under the run row's lock: gapless event seq and message ids.
    last_event_seq = models.PositiveBigIntegerField(default=0)
    last_message_no = models.PositiveBigIntegerField(default=0)
    # At most one coordinator wake runs at a time. Every request for a wake
    # bumps wake_requests; a wake may only go idle if none arrived meanwhile.
    coordinator_busy = models.BooleanField(default=False)
    wake_requests = models.PositiveBigIntegerField(default=0)
    # When a wake task was queued for an idle coordinator, until a wake
    # starts: requests meanwhile queue no other (runs/stores.py wake_sql).
    wake_queued = models.DateTimeField(null=True, blank=True)
    # Set by the reaper when the run made no progress for too long.
    stuck_reason = models.CharField(max_length=300, blank=True)
    # When the sweeper last queued the start of this pending run again (runs/sweeper.py).
    start_requeued = models.DateTimeField(null=True, blank=True)
    # Shell commands that delete or force-push are refused unless this is set
    # (by an approver; see the approvals flow).
    destructive_approved = models.BooleanField(default=False)
    # A run started by another run's tool call (agent-as-tool): its result
    # becomes that call's result.
    parent_tool_call = models.ForeignKey(
        "ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="child_runs"
    )

    class Meta:
        ordering = ["-created"]
        # The runs list filters by who started a run or by workflow, newest first.
        indexes = [
            models.Index(fields=["created_by", "-created"], name="run_created_by_created"),
            models.Index(fields=["workflow", "-created"], name="run_workflow_created"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.workflow.name})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class Step(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        SKIPPED = "skipped"
        CANCELLED = "cancelled"

    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.CANCELLED)

    class Kind(models.TextChoices):
        COORDINATOR = "coordinator"
        STEP = "step"
        # A repeat-until loop: its row completes when the loop is done, and
        # steps that depend on the loop wait for it.
        LOOP = "loop"

    # Indexed by step_run_step_id (run, step_id): an index of its own would
    # only cost every write of a step row (three a turn).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    step_id = models.CharField(max_length=200, help_text="Runtime id, namespaced inside containers.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.STEP)
    agent = models.CharField(max_length=64)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    depends_on = models.JSONField(default=list, blank=True)
    instructions = models.TextField(blank=True)
    # Where the step runs: the innermost container's runtime id ("" at top
    # level) and the iteration of it; the forEach caps that apply to it; the
    # container's variables ($item, $iteration, ...).
    container = models.CharField(max_length=200, blank=True)
    iteration = models.PositiveIntegerField(null=True, blank=True)
    limits = models.JSONField(default=list, blank=True)
    variables = models.JSONField(default=dict, blank=True)
    transcript = models.JSONField(default=list, blank=True)
    output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    turns = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    # Blank while the mailbox is open; else the drop reason later sends get.
    mailbox_closed_reason = models.CharField(max_length=40, blank=True)
    # Wake cycles: extra turns taken because messages arrived after the
    # step's answer. held_since is when it first answered.
    wake_cycles = models.PositiveIntegerField(default=0)
    held_since = models.DateTimeField(null=True, blank=True)
    # A completed step can be resumed for one more turn by a forward.
    resumes = models.PositiveIntegerField(default=0)
    resuming = models.BooleanField(default=False)
    # The lease on the step's current turn: which worker is taking it, and
    # until when (renewed while the model thinks). An expired lease means
    # the worker died; the sweeper hands the turn to another. Neither is
    # indexed (the sweeper finds running steps by step_running): a claim or
    # a renewal then changes no indexed column, and PostgreSQL can write it
    # as a heap-only update, with no new entry in any of the step's indexes.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    # When the step's next turn was queued, until a worker claims it (set
    # with whatever queues the turn, cleared by the claim): a step waiting
    # for mail, a tool task or a person has none. Past ZENWEB_REQUEUE_AFTER
    # the sweeper queues the turn again (its task may be lost). Unindexed,
    # like the lease: the sweeper reads it among the running steps.
    turn_queued = models.DateTimeField(null=True, blank=True)
    # A worker the coordinator spawned: the spawn_worker call, the tools it
    # was granted, and what it declared it would write.
    spawned_by = models.CharField(max_length=100, blank=True)
    tools = models.JSONField(default=list, blank=True)
    writes = models.JSONField(default=list, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step_id"], name="step_run_step_id")]
        ordering = ["run", "position"]
        # Asked after every step's end (runs/stores.py schedule_state): is a
        # step pending, is any unfinished? Only those rows are indexed, so a
        # 500-step run answers from a few entries instead of 500 rows.
        indexes = [
            models.Index(fields=["run"], condition=models.Q(kind="step", status="pending"), name="step_pending"),
            models.Index(
                fields=["run"],
                condition=~models.Q(kind="coordinator")
                & (models.Q(resuming=True) | ~models.Q(status__in=["completed", "failed", "skipped", "cancelled"])),
                name="step_unfinished",
            ),
            # The sweeper's: running steps, whose leases it checks.
            models.Index(fields=["run"], condition=models.Q(status="running"), name="step_running"),
        ]

    def __str__(self) -> str:
        return self.step_id

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def depth(self) -> int:
        """How many containers the step is inside, for indenting it."""
        return len(ids.parse(self.step_id)) - 1


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


class ToolCall(models.Model):
    """One tool call with the metadata its executor got (Goa-AI's names).

    ``arguments`` has injected fields masked; ``result`` is exactly what the
    model saw. A service-backed call runs as its own task: ``queued`` ->
    ``running`` (a worker holds its lease) -> ``done`` | ``failed`` |
    ``timed_out``. ``waiting`` calls get their result from a child run or
    once a person decides."""

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
    """A statement a run produced, with the source that backs it (seed 004)."""

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
        from django.utils import timezone

        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def link(self) -> str:
        """The source URL when it is http(s); anything else is never a link."""
        return self.url if self.url.lower().startswith(("http://", "https://")) else ""


class Command(models.Model):
    """A free-text command and the coordinator's answer (COORDINATOR_RESULT).
    A command that selected a workflow has a run; others (unknown workflow,
    missing inputs, ambiguous, blocked by mode) have only the answer."""

    text = models.TextField()
    mode = models.CharField(max_length=8, choices=Run.Mode.choices, default=Run.Mode.CHAT)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="commands"
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


class Approval(models.Model):
    """A request for a person to allow destructive work: a whole workflow run,
    or one tool call on the workflow's approval list. The decision covers
    exactly ``arguments`` (by hash): changed arguments need a new approval."""

    class Kind(models.TextChoices):
        WORKFLOW = "workflow"
        TOOL = "tool"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        LAPSED = "lapsed"

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
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created"]
        permissions = [("decide_approval", "Can approve or reject destructive work")]

    def __str__(self) -> str:
        return f"approval {self.pk}: {self.what[:60]}"


class ApprovalDecision(models.Model):
    """One person's decision on an approval, with the arguments they saw."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="decisions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approval_decisions")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField()
    arguments_hash = models.CharField(max_length=64)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["approval", "user"], name="one_decision_per_person")]
        ordering = ["id"]


class ApiToken(models.Model):
    """A token for scripts calling the JSON API (``Authorization: Token <key>``).
    Only a hash of the key is stored; the key is shown once, when created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=8)
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


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
