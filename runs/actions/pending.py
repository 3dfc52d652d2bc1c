"""Tool calls whose result comes later: from their own task, from a child
run, or once a person decided on an approval. The call was stored
``queued`` or ``waiting`` with a placeholder in the step's transcript; delivering its result replaces the placeholder,
and once no call of the step waits any more, the step takes its next turn."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.events.tool_events import ChildRunResult, ToolResult
from runs import queue
from runs.models import Run, Step, ToolCall
from runs.store.sql import store


def deliver_result(
    call: ToolCall,
    text: str,
    *,
    status: str,
    event: type[ToolResult | ChildRunResult],
    event_data: dict[str, Any],
    error_kind: str = "",
    omitted: bool = False,
) -> RuntimeEvent | None:
    """Store the late result of ``call``. Call with the run row locked.
    Returns the event that says so, for the caller to emit through its unit
    of work; None if the call had its result already. The step's next turn
    sees every result in the order the model asked for the calls."""
    result = {"status": status, "ok": status == ToolCall.Status.DONE, "result": text}
    if not store().deliver_call_result(call.pk, {**result, "error_kind": error_kind, "omitted": omitted}):
        return None
    step = Step.objects.select_for_update().get(pk=call.step_id)
    for message in step.transcript:
        if message.get("role") == "tool" and message.get("tool_call_id") == call.tool_call_id:
            message["content"] = text
    run = Run.objects.get(pk=call.run_id)
    still_waiting = ToolCall.objects.filter(step=step, status__in=ToolCall.PENDING).exists()
    next_turn = run.status == Run.Status.RUNNING and step.status == Step.Status.RUNNING and not still_waiting
    if next_turn:
        # Marked queued with the transcript (Step.turn_queued): the sweeper queues it again if its task is lost.
        step.turn_queued = timezone.now()
    store().save_transcript(step, turn_queued=next_turn)
    delivered = event(tool_call_id=call.tool_call_id, result=text[:2000], **event_data)
    if next_turn:
        turn = step.turns + 1
        queue.send_after_commit(queue.RUN_STEP_TURN, step.pk, turn)
    return RuntimeEvent.of(delivered, step.step_id)
