"""Agent-as-tool: a child run's end becomes its parent's tool result.

The parent step's turn that started the child stores its call as
``waiting``; when the child ends, its result (or why it failed) replaces the
placeholder in the parent's transcript, and once no call of that turn is
waiting the parent step takes its next turn. The two runs are changed in
separate transactions (the child's end, then this), so the run-row locks are
never taken child-then-parent and parent-then-child at once.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.tools.errors import RetryHint, failure_text
from agents.tools.results import ToolResult
from runs.models import Run, Step, ToolCall
from runs.stores import DjangoEventSink, lock_run


def do_deliver_child_result(child_id: int) -> None:
    """Hand a finished child run's result to the tool call that started it."""
    from runs import tasks

    child = Run.objects.select_related("parent_tool_call__step").get(pk=child_id)
    call = child.parent_tool_call
    if call is None or not child.is_terminal:
        return
    with transaction.atomic():
        lock_run(call.run_id)
        if not ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.WAITING).exists():
            return  # delivered already
        ok = child.status == Run.Status.COMPLETED
        if ok:
            text, omitted = ToolResult(child.result or "(the run finished without a summary)").model_text(
                settings.ZENWEB_MAX_TOOL_RESULT_CHARS
            )
        else:
            why = child.error or child.status
            text = failure_text(f"run {child.pk} of {child.workflow.name} ended {child.status}: {why}", _hint())
            omitted = False
        ToolCall.objects.filter(pk=call.pk).update(
            status=ToolCall.Status.DONE if ok else ToolCall.Status.FAILED,
            ok=ok,
            result=text,
            omitted=omitted,
            error_kind="" if ok else "unavailable",
        )
        step = Step.objects.select_for_update().get(pk=call.step_id)
        for message in step.transcript:
            if message.get("role") == "tool" and message.get("tool_call_id") == call.tool_call_id:
                message["content"] = text
        step.save(update_fields=["transcript"])
        DjangoEventSink(call.run_id).emit(
            RuntimeEvent(
                "child_run_result",
                step.step_id,
                {"tool_call_id": call.tool_call_id, "run_id": child.pk, "status": child.status, "result": text[:2000]},
            )
        )
        run = Run.objects.get(pk=call.run_id)
        still_waiting = ToolCall.objects.filter(step=step, status=ToolCall.Status.WAITING).exists()
        if run.status == Run.Status.RUNNING and step.status == Step.Status.RUNNING and not still_waiting:
            turn = step.turns + 1
            transaction.on_commit(lambda: tasks.run_step_turn.delay(step.pk, turn))


def cancel_children_after_commit(run: Run) -> None:
    """A run that ends takes the child runs its tool calls started with it."""
    from runs.actions.lifecycle import do_cancel_run

    children = list(
        Run.objects.filter(parent_tool_call__run=run).exclude(status__in=Run.TERMINAL).values_list("pk", flat=True)
    )
    for child in children:
        transaction.on_commit(lambda child=child: do_cancel_run(child, f"parent run {run.pk} ended {run.status}"))


def _hint() -> RetryHint:
    return RetryHint("unavailable", "replan")
