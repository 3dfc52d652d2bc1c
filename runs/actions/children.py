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

from agents.events.tool_events import ChildRunResult
from agents.tools.builtin.result_models import ChildRunAnswer
from agents.tools.errors import RetryHint, failure_text
from agents.tools.results import ToolResult
from runs.actions.pending import deliver_result
from runs.models import Run, ToolCall
from runs.store.unit_of_work import UnitOfWork


def do_deliver_child_result(child_id: int) -> None:
    """Hand a finished child run's result to the tool call that started it."""
    child = Run.objects.select_related("parent_tool_call__step").get(pk=child_id)
    call = child.parent_tool_call
    if call is None or not child.is_terminal:
        return
    with transaction.atomic(), UnitOfWork(call.run_id) as uow:
        uow.lock_run()
        if child.status == Run.Status.COMPLETED:
            summary = child.result or "(the run finished without a summary)"
            answer = ChildRunAnswer(run_id=child.pk, workflow=child.workflow.name, summary=summary)
            text, omitted = ToolResult(answer.model_dump()).model_text(settings.ZENWEB_MAX_TOOL_RESULT_CHARS)
            status, error_kind = ToolCall.Status.DONE, ""
        else:
            why = child.error or child.status
            text = failure_text(f"run {child.pk} of {child.workflow.name} ended {child.status}: {why}", _hint())
            status, error_kind, omitted = ToolCall.Status.FAILED, "unavailable", False
        delivered = deliver_result(
            call,
            text,
            status=status,
            error_kind=error_kind,
            omitted=omitted,
            event=ChildRunResult,
            event_data={"run_id": child.pk, "status": child.status},
        )
        if delivered is not None:
            uow.sink.emit(delivered)


def _hint() -> RetryHint:
    return RetryHint("unavailable", "replan")
