"""Tool calls as durable tasks (Goa-AI's activities, on Celery).

A turn whose model asks for service-backed tools (files, shell, research,
MCP: every tool that is not ``inline``) stores each call ``queued`` and
frees its worker. Each call then runs as its own ``execute_tool_call`` task,
in parallel across workers:

    queued -> running (a worker holds the call's lease, renewed while the
    tool runs) -> done | failed | timed_out

and its result replaces the call's placeholder in the step's transcript.
When the last call of the turn has its result, the step's next turn is
enqueued (``pending.deliver_result``), so the model sees the results in the
order it asked for them.

A worker that dies mid-call leaves a running call whose lease expires: the
sweeper queues it again, once. Each attempt is journaled under the call's
idempotency key (``toolcall:<pk>``), so a call that had finished is never
run a second time; its stored result is delivered instead.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from agents import metrics
from agents.events import Event as RuntimeEvent
from agents.events.run_events import LeaseExpired
from agents.events.tool_events import ToolResult, ToolStarted
from agents.spec import WorkflowSpec
from agents.tools import Tool
from agents.tools.errors import FailureKind, RetryHint, failure_text
from agents.tools.registry import ToolOutcome
from runs import leases
from runs.actions.catalog import workflow_spec
from runs.actions.common import dispatch_after_commit, store_artifacts
from runs.actions.pending import deliver_result
from runs.actions.tool_host import stored_call_context
from runs.actions.tooling import step_tools
from runs.models import Run, Step, ToolCall
from runs.store.journal import DjangoToolJournal
from runs.store.sql import store
from runs.store.sql.errors import connection_lost
from runs.store.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

# A call whose worker died is run again this many times in all, then fails.
MAX_ATTEMPTS = 2


def timeout_for(spec: WorkflowSpec, tool: Tool | None, name: str) -> float:
    """The workflow's per-tool setting, else the tool's own, else the workflow's default."""
    options = spec.options
    if name in options.tool_timeouts:
        return options.tool_timeouts[name]
    if tool is not None and tool.timeout is not None:
        return tool.timeout
    return options.tool_timeout


def do_execute_tool_call(call_pk: int) -> None:
    """Run one queued call and deliver its result. A duplicate task, or one
    for a call another worker holds, does nothing."""
    owner = leases.worker_identity()
    leases.beat_unless_recent()
    call = _claim(call_pk, owner)
    if call is None:
        return
    run, step = call.run, call.step
    if run.status != Run.Status.RUNNING or step.status != Step.Status.RUNNING:
        # Cancelled or failed while the call was queued: it never runs.
        text = failure_text(f"{call.name} was not run: the step is {step.status}", RetryHint("unavailable", "finish"))
        status = _stopped_status(run.status, step.status)
        _finish(call, owner, ToolOutcome(text, ok=False, error_kind="unavailable"), status, 0)
        return
    spec = workflow_spec(run.workflow)
    registry, tools = step_tools(spec, step)
    timeout = timeout_for(spec, registry.get(call.name), call.name)
    journal = DjangoToolJournal(step.pk, owner, outside_transaction=True)
    key = f"toolcall:{call.pk}"
    started = time.monotonic()
    outcome = journal.get(key)
    if outcome is None:
        journal.begin(key, call.name)
        ctx = stored_call_context(call, run, step, uow=None, destructive_approved=run.destructive_approved)
        arguments = _model_arguments(call, registry.get(call.name))
        with leases.renewing(call.pk, owner, model=ToolCall):
            outcome, stopped = _within(
                timeout, lambda: registry.call(ctx, call.name, arguments, tools), lambda: _stopped(step), ctx.cancelled
            )
            if outcome is not None and not stopped:
                # Journaled under the lease: storing waits out a database
                # that is away (journal._until_stored), and meanwhile no
                # other worker may take the call and run it again.
                journal.finish(key, outcome)
        if stopped:
            # Not journaled as finished: what the tool did before it stopped is unknown.
            how = "it returned" if outcome is not None else f"it was abandoned after {STOP_GRACE_SECONDS:g}s more"
            text = failure_text(f"{call.name} was stopped ({how}): {stopped}", RetryHint("unavailable", "finish"))
            halted = ToolOutcome(text, ok=False, error_kind="unavailable")
            # _stopped names the status that stopped it last: "... is cancelled".
            _finish(call, owner, halted, _stopped_status(stopped.rsplit(" ", 1)[-1]), _ms(started))
            return
        if outcome is None:
            message = f"{call.name} did not finish within {timeout:g}s (toolTimeout); it was abandoned"
            text = failure_text(message, RetryHint("timeout", "replan", question="Is there a smaller request?"))
            timed_out = ToolOutcome(text, ok=False, error_kind="timeout")
            _finish(call, owner, timed_out, ToolCall.Status.TIMED_OUT, _ms(started))
            return
    status = ToolCall.Status.DONE if outcome.ok else ToolCall.Status.FAILED
    _finish(call, owner, outcome, status, _ms(started))


def release_call(call_pk: int, owner: str) -> None:
    """Queue again a call ``owner`` held when its attempt stopped on a lost
    database connection; that attempt does not count against MAX_ATTEMPTS
    (those are for workers that died)."""
    store().requeue_call(call_pk, owner)


def _claim(call_pk: int, owner: str) -> ToolCall | None:
    """queued -> running under this worker's lease, with its event."""
    with transaction.atomic():
        call = ToolCall.objects.select_related("run__workflow", "run__created_by", "step").get(pk=call_pk)
        store().lock_run(call.run_id)
        now = timezone.now()
        if not store().claim_call(call_pk, owner, now, now + timedelta(seconds=settings.ZENWEB_LEASE_SECONDS)):
            return None
        call.refresh_from_db(fields=["status", "attempts", "lease_owner", "lease_expires", "started"])
        started = ToolStarted(tool_call_id=call.tool_call_id, name=call.name, attempt=call.attempts, worker=owner)
        with UnitOfWork(call.run_id) as uow:
            uow.sink.emit(RuntimeEvent.of(started, call.step.step_id))
    return call


def _finish(call: ToolCall, owner: str, outcome: ToolOutcome, status: str, duration_ms: int) -> None:
    """Store what the call returned and hand it to the step, unless the call
    was taken from this worker meanwhile (its lease expired and it was
    queued again): then the other attempt delivers."""
    with transaction.atomic(), UnitOfWork(call.run_id) as uow:
        uow.lock_run()
        returned = {
            "bounds": outcome.bounds.as_data() if outcome.bounds else None,
            "duration_ms": duration_ms,
            "counted": outcome.counted,
        }
        if not store().finish_call(call.pk, owner, returned, timezone.now()):
            return
        store_artifacts(call, outcome.artifacts)
        metrics.tool_call_ended(call.name, outcome.ok)
        data = {"name": call.name, "status": status, "ok": outcome.ok, "duration_ms": duration_ms}
        if outcome.bounds is not None:
            data["bounds"] = outcome.bounds.as_data()
        if outcome.error_kind:
            data["error_kind"] = outcome.error_kind
        delivered = deliver_result(
            call,
            outcome.text,
            status=status,
            error_kind=outcome.error_kind or "",
            omitted=outcome.omitted,
            event=ToolResult,
            event_data=data,
        )
        if delivered is not None:
            uow.sink.emit(delivered)


def _model_arguments(call: ToolCall, tool: Tool | None) -> str:
    """The stored arguments without the masked injected fields: the registry
    fills those in from the context again."""
    try:
        data = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return call.arguments
    if isinstance(data, dict) and tool is not None:
        data = {key: value for key, value in data.items() if key not in tool.injected}
    return json.dumps(data)


# How often a running call asks whether its step still runs, and how long
# a call told to stop has to return before it is abandoned.
STOP_CHECK_SECONDS = 1.0
STOP_GRACE_SECONDS = 5.0


def _within(
    timeout: float, work: Callable[[], ToolOutcome], stopped: Callable[[], str], cancel: threading.Event
) -> tuple[ToolOutcome | None, str]:
    """Run ``work`` in a thread and wait at most ``timeout`` seconds, asking
    every STOP_CHECK_SECONDS whether to stop (``stopped`` gives why, or "").
    Returns what ``work`` returned (None if it is still running: the thread
    is abandoned, not killed; tools with their own limits, such as
    run_shell, stop themselves) and why it was stopped. A call told to stop
    has ``cancel`` set and STOP_GRACE_SECONDS to return."""
    box: list[ToolOutcome] = []

    def target() -> None:
        try:
            box.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=target, name="zenweb-tool", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    why = ""
    while thread.is_alive() and (left := deadline - time.monotonic()) > 0:
        thread.join(min(left, STOP_CHECK_SECONDS))
        if thread.is_alive() and (why := _unless_disconnected(stopped)):
            cancel.set()
            thread.join(STOP_GRACE_SECONDS)
            break
    return (box[0] if box else None), why


def _unless_disconnected(stopped: Callable[[], str]) -> str:
    """``stopped()``, or "" while the database is away: leaving the tool
    running beats abandoning it to a retry that would run it a second time."""
    try:
        return stopped()
    except (OperationalError, InterfaceError) as exc:
        if not connection_lost(exc):
            raise
        log.warning("could not ask whether a tool call should stop: %s", exc)
        connection.close()
        return ""


def _stopped(step: Step) -> str:
    """Why a call of ``step`` should stop now: its step or its run is no
    longer running (a cancel, a failure elsewhere); "" while both run."""
    found = Step.objects.filter(pk=step.pk).values_list("status", "run__status").first()
    if found is None:
        return f"step {step.step_id} no longer exists"
    step_status, run_status = found
    if run_status != Run.Status.RUNNING:
        return f"the run is {run_status}"
    if step_status != Step.Status.RUNNING:
        return f"step {step.step_id} is {step_status}"
    return ""


def _stopped_status(*statuses: str) -> str:
    """A call stopped because its run or step is no longer running: cancelled
    if a cancel did it, else failed."""
    return ToolCall.Status.CANCELLED if Run.Status.CANCELLED in statuses else ToolCall.Status.FAILED


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def sweep_tool_calls(now: datetime, owners: Q | None = None) -> int:
    """Calls whose worker died (their lease expired while running, or held
    by ``owners``, processes known dead): queue them again, or fail them
    after MAX_ATTEMPTS. Queued calls of running runs whose task was lost are
    re-sent by ``recovery.do_resume_run``."""
    swept = 0
    lost = Q(lease_expires__lt=now) if owners is None else owners
    expired = ToolCall.objects.filter(lost, status=ToolCall.Status.RUNNING).exclude(lease_owner="")
    for call in expired.select_related("step"):
        with transaction.atomic(), UnitOfWork(call.run_id) as uow:
            uow.lock_run()
            # Neither renewed nor taken since it was read.
            expired_event = LeaseExpired(tool_call_id=call.tool_call_id, name=call.name, owner=call.lease_owner)
            if call.attempts < MAX_ATTEMPTS:
                if not store().expire_call_lease(call, requeue=True):
                    continue
                uow.sink.emit(RuntimeEvent.of(expired_event, call.step.step_id))
                dispatch_after_commit([call.pk])
            else:
                if not store().expire_call_lease(call, requeue=False):
                    continue
                uow.sink.emit(RuntimeEvent.of(expired_event, call.step.step_id))
                message = f"{call.name} was lost with its worker {call.attempts} times; it is not tried again"
                _deliver_failure(call, message, "unavailable", uow)
            swept += 1
    return swept


def stop_unfinished_calls(run_id: int, why: str, uow: UnitOfWork, *, cancelled: bool = False) -> None:
    """Close the queued and running calls of a run that is ending, each with
    its tool_result (so before workflow_end): ``cancelled`` if a cancel ends
    it, else failed; and mark the journal rows of calls still running
    ``cancelled``. A worker still running such a call then finds it closed
    (``_finish``) and writes nothing. Call in ``uow``'s block, with the run
    row locked."""
    pending = ToolCall.objects.filter(run_id=run_id, status__in=(ToolCall.Status.QUEUED, ToolCall.Status.RUNNING))
    now = timezone.now()
    status = ToolCall.Status.CANCELLED if cancelled else ToolCall.Status.FAILED
    for call in pending.select_related("step"):
        store().close_call_lease(call.pk, now)
        text = failure_text(f"{call.name} was stopped: {why}", RetryHint("unavailable", "finish"))
        delivered = deliver_result(
            call,
            text,
            status=status,
            error_kind="unavailable",
            event=ToolResult,
            event_data={"name": call.name, "status": status, "ok": False, "error_kind": "unavailable"},
        )
        if delivered is not None:
            uow.sink.emit(delivered)
    store().cancel_running_executions(run_id, now)


def do_fail_tool_call(call_pk: int, error: str) -> None:
    """Give a call that broke its task a failed result, so its step goes on."""
    with transaction.atomic():
        call = ToolCall.objects.select_related("step").get(pk=call_pk)
        with UnitOfWork(call.run_id) as uow:
            uow.lock_run()
            store().close_call_lease(call_pk, timezone.now())
            _deliver_failure(call, error, "internal", uow)


def _deliver_failure(call: ToolCall, message: str, kind: FailureKind, uow: UnitOfWork) -> None:
    """A failed result the tool itself never gave (its worker or task broke)."""
    delivered = deliver_result(
        call,
        failure_text(message, RetryHint(kind, "replan")),
        status=ToolCall.Status.FAILED,
        error_kind=kind,
        event=ToolResult,
        event_data={"name": call.name, "status": ToolCall.Status.FAILED, "ok": False},
    )
    if delivered is not None:
        uow.sink.emit(delivered)


def queued_calls(run_id: int) -> list[int]:
    """Calls of a run still waiting for their task (for a resume)."""
    return list(ToolCall.objects.filter(run_id=run_id, status=ToolCall.Status.QUEUED).values_list("pk", flat=True))
