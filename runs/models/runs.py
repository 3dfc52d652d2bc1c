"""A run of a workflow and its steps (the coordinator's row among them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents import ids
from runs.models.catalog import Workflow


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
    # Under way, and marked stuck by the sweeper (a reason left from before
    # a run ended does not count): runs.filter(Run.STUCK), run.is_stuck.
    STUCK = ~models.Q(stuck_reason="") & ~models.Q(status__in=TERMINAL)

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
    # starts: requests meanwhile queue no other (runs/store/sql/runs.py wake_sql).
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
    # The run's OpenTelemetry trace (agents/telemetry.py new_run_context):
    # every span of the run, in any process, is parented on it. None when
    # the process that made the run did not trace.
    trace_context = models.JSONField(null=True, blank=True)
    # A fork of another run (runs/actions/forks.py): the run it was forked
    # from and the step it was forked at; the steps before that point are
    # that run's results, reused, not run again.
    forked_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    fork_step = models.CharField(max_length=200, blank=True)
    # The fork step's instructions as the person edited them ("": as they were).
    fork_instructions = models.TextField(blank=True)
    # Not columns: how many steps the run has and how many ended with each
    # status, set on the rows the runs list shows (runs/views/runs.py).
    steps_total: int
    steps_ended: list[tuple[str, int]]

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

    @property
    def is_stuck(self) -> bool:
        return bool(self.stuck_reason) and not self.is_terminal


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
    # The step's own model (its YAML's model:), else blank: its agent's.
    model = models.CharField(max_length=200, blank=True)
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
    # The attempt running (0 the first); a failed step's retries run it again.
    attempt = models.PositiveIntegerField(default=0)
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
    # A forked run's step whose result is its parent run's step's, reused.
    reused_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Not a column: how many messages wait in the step's mailbox, set on the
    # rows the step list shows (runs/live.py, runs/store/sql/live.py).
    unread: int
    # Not a column: its tokens' cost as the run page shows it (runs/live.py).
    cost_shown: str

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
            # The sweeper's: running steps, whose leases it checks; and, in
            # id order, a run's first turns that wait queued (runs/store/sql/queued_turns.py).
            models.Index(fields=["run", "id"], condition=models.Q(status="running"), name="step_running"),
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
