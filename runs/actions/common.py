"""What the action modules share: a run's limits, the router of a run with
its resume rule, and storing a turn."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents import expansion, ids
from agents.core import machine
from agents.core.decisions import DropMessage, ResumeStep
from agents.core.happenings import ForwardToEnded
from agents.events import Event as RuntimeEvent
from agents.events import EventSink
from agents.events.run_events import ResumeQueued, ResumeStarted, TranscriptSealed
from agents.router import DropReason, MailboxStore, MessageRouter, Rejection, Resolver, RouterMessage
from agents.runner import TurnResult
from runs import queue
from runs.actions.catalog import workflow_spec
from runs.models import Artifact, Event, Run, Step, ToolCall
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork, UnitPerEventSink


@dataclass(frozen=True)
class Limits:
    """A run's caps: the workflow's options where it sets them, else settings."""

    max_mailbox_size: int
    coordinator_wake_cycles: int
    step_wake_cycles: int
    hold_timeout: float
    max_transcript_bytes: int

    @classmethod
    def of(cls, run: Run) -> Limits:
        options = workflow_spec(run.workflow).options

        def option(name: str, default):
            value = getattr(options, name, None)
            return default if value is None else value

        return cls(
            max_mailbox_size=option("max_mailbox_size", settings.ZENWEB_MAX_MAILBOX_SIZE),
            coordinator_wake_cycles=option("max_wake_cycles", settings.ZENWEB_COORDINATOR_WAKE_CYCLES),
            step_wake_cycles=option("step_max_wake_cycles", settings.ZENWEB_STEP_WAKE_CYCLES),
            hold_timeout=option("hold_timeout", settings.ZENWEB_HOLD_TIMEOUT),
            max_transcript_bytes=settings.ZENWEB_MAX_TRANSCRIPT_BYTES,
        )


ROUTER_RUN_FIELDS = ("status", "workflow__id", "workflow__created")


def router_for(
    run: Run | int,
    *,
    finishing: bool = False,
    context_sender: str | None = None,
    uow: UnitOfWork | None = None,
) -> MessageRouter:
    """The router of a run (a Run with its workflow, or its id). ``finishing``
    is set during the coordinator's last wake: a forward to a finished step
    then drops as resume-shutdown. ``context_sender`` is the step whose
    message the coordinator is handling: a bare target id that matches
    several iterations picks that step's. ``uow``: the unit of work whose block the router
    routes in (its mailbox store and sink hold what it writes)."""
    if not isinstance(run, Run):
        # Built several times a turn: load only what the limits, the resumer
        # and the resolver read (a stored spec is parsed once per process).
        run = Run.objects.select_related("workflow").only(*ROUTER_RUN_FIELDS).get(pk=run)
    limits = Limits.of(run)
    mailboxes: MailboxStore
    sink: EventSink
    if uow is not None:
        mailboxes, sink = uow.mailboxes, uow.sink
    else:
        mailboxes, sink = DjangoMailboxStore(run.pk), UnitPerEventSink(run.pk)
    return MessageRouter(
        mailboxes,
        sink,
        max_mailbox_size=limits.max_mailbox_size,
        resumer=Resumer(run, limits, finishing, mailboxes, sink),
        resolver=_resolver(run, context_sender),
    )


def _resolver(run: Run, context_sender: str | None) -> Resolver:
    def resolve(target: str) -> str | Rejection | None:
        live = list(run.steps.filter(kind=Step.Kind.STEP).order_by("position").values_list("step_id", flat=True))
        containers = expansion.container_kinds(workflow_spec(run.workflow))
        resolution = ids.resolve(target, live, context_sender, containers)
        if resolution.kind == "container":
            return Rejection(resolution.rejection())
        return resolution.runtime_id if resolution.kind in ("exact", "bare") else None

    return resolve


class Resumer:
    """A forward to a step that ended: resumed for one more turn, or
    dropped, as the state machine decides (machine.ForwardToEnded:
    agents/core/resumes.py)."""

    def __init__(self, run: Run, limits: Limits, finishing: bool, store: MailboxStore, sink: EventSink) -> None:
        self.run = run
        self.limits = limits
        self.finishing = finishing
        # The router's: a message and event of a turn go where its others go.
        self.store = store
        self.sink = sink

    def __call__(self, message: RouterMessage) -> DropReason | None:
        step = Step.objects.select_for_update().get(run_id=self.run.pk, step_id=message.recipient)
        forward = ForwardToEnded(
            step.step_id,
            step.status,
            run_going_on=not self.finishing and self.run.status == Run.Status.RUNNING,
            transcript_bytes=len(json.dumps(step.transcript)) if step.transcript else 0,
            max_transcript_bytes=self.limits.max_transcript_bytes,
            resumes=step.resumes,
            max_resumes=self.limits.step_wake_cycles,
            resuming=step.resuming,
        )
        for decision in machine.decide(machine.UNREAD, forward):
            if isinstance(decision, DropMessage):
                if decision.reason == "transcript_too_large":
                    self._sealed(step, forward.transcript_bytes)
                return DropReason[decision.reason.upper()]
            if isinstance(decision, ResumeStep):
                self._resume(step, message, decision)
        return None

    def _resume(self, step: Step, message: RouterMessage, resume: ResumeStep) -> None:
        """Keep ``message`` for the resumed turn of ``step``; a resume that
        ``starts`` is said with its event and queued."""
        self.store.append(message)
        store().mark_resuming(step.pk, starts=resume.starts)
        if resume.starts:
            started = ResumeStarted(message_id=message.message_id, resume=resume.resume)
            self.sink.emit(RuntimeEvent.of(started, step.step_id))
            queue.send_after_commit(queue.RESUME_STEP, step.pk)
        else:  # it joins the resume under way (zenflow's resume_queued)
            queued = ResumeQueued(message_id=message.message_id, sender=message.sender, resume=resume.resume)
            self.sink.emit(RuntimeEvent.of(queued, step.step_id))

    def _sealed(self, step: Step, size: int) -> None:
        """Say once that ``step``'s transcript is past the resume cap."""
        if Event.objects.filter(run_id=step.run_id, step_id=step.step_id, type="transcript_sealed").exists():
            return
        cap = self.limits.max_transcript_bytes
        error = f"its transcript is {size:,} bytes, past ZENWEB_MAX_TRANSCRIPT_BYTES ({cap:,}): no resume reads it"
        self.sink.emit(RuntimeEvent.of(TranscriptSealed(reason="transcript-too-large", error=error), step.step_id))


def save_turn(step: Step, result: TurnResult, *, next_turn_queued: bool = False) -> int:
    """Store a turn's transcript, token counts, tool calls and their artifacts,
    and link the child runs its calls started. Returns how many messages
    wait unread in the step's mailbox after the turn (read by the same
    statement: one round trip fewer while the run is locked). The step and
    its tool calls go in one round trip on PostgreSQL.
    ``next_turn_queued``: the caller queues the step's next turn; the
    statement marks the step with it (Step.turn_queued)."""
    step.transcript = result.transcript
    values: dict[str, Any] = {"transcript": result.transcript}
    if next_turn_queued:
        values["turn_queued"] = timezone.now()
    rows = [_tool_call_row(step, call) for call in result.tool_calls]
    tokens = (result.prompt_tokens, result.completion_tokens)
    # The calls' ids set, as create() would: without the ORM's per-query work.
    step.prompt_tokens, step.completion_tokens, step.turns, unread = store().save_turn_and_calls(
        step, values, tokens, rows
    )
    queued: list[int] = []
    for row, call in zip(rows, result.tool_calls, strict=True):
        outcome = call.outcome
        store_artifacts(row, outcome.artifacts)
        if outcome.queued:
            queued.append(row.pk)
        child_run_id = int(outcome.child_run_id) if outcome.child_run_id else None
        approval_id = int(outcome.approval_id) if outcome.approval_id else None
        store().link_to_call(row, child_run_id=child_run_id, approval_id=approval_id)
    # Service-backed calls become tasks of their own (runs/actions/tool_tasks.py).
    dispatch_after_commit(queued)
    return unread


def _tool_call_row(step: Step, call) -> ToolCall:
    """The ToolCall row of one call of a turn, as its outcome left it."""
    outcome = call.outcome
    if outcome.queued:
        status = ToolCall.Status.QUEUED
    elif outcome.pending:
        status = ToolCall.Status.WAITING
    else:
        status = ToolCall.Status.DONE if outcome.ok else ToolCall.Status.FAILED
    return ToolCall(
        run_id=step.run_id,
        step=step,
        tool_call_id=call.meta.tool_call_id,
        session_id=call.meta.session_id,
        turn_id=call.meta.turn_id,
        parent_tool_call_id=call.meta.parent_tool_call_id,
        name=call.name,
        arguments=json.dumps(outcome.arguments) if outcome.arguments is not None else call.arguments,
        result=outcome.text,
        ok=outcome.ok,
        status=status,
        error_kind=outcome.error_kind or "",
        bounds=outcome.bounds.as_data() if outcome.bounds else None,
        omitted=outcome.omitted,
        counted=outcome.counted,
        duration_ms=call.duration_ms,
        created=timezone.now(),
    )


def dispatch_after_commit(call_pks: list[int]) -> None:
    """Send one task per queued call once the turn that asked for them commits."""
    queue.queue_after_commit(queue.EXECUTE_TOOL_CALL, [(pk,) for pk in call_pks])


def store_artifacts(call: ToolCall, artifacts) -> None:
    """Keep what a tool call produced for people (never sent to the model)."""
    store().add_artifacts(
        [
            Artifact(
                run_id=call.run_id,
                tool_call=call,
                kind=artifact.kind,
                title=artifact.title[:200],
                audience=artifact.audience,
                source_tool=artifact.source_tool,
                data=artifact.data,
            )
            for artifact in artifacts
        ]
    )
