"""Celery tasks: thin wrappers that pass ids to runs/actions.py.

Each task is safe to run twice: the actions claim their work with a
conditional UPDATE, so a redelivered task finds nothing left to do.
"""

from __future__ import annotations

import logging

from celery import shared_task

from runs import actions

log = logging.getLogger(__name__)


@shared_task
def start_run(run_id: int) -> None:
    try:
        actions.do_start_run(run_id)
    except Exception as exc:
        log.exception("starting run %s failed", run_id)
        actions.do_fail_run(run_id, f"could not start: {type(exc).__name__}: {exc}")


@shared_task
def run_step_turn(step_pk: int, turn: int) -> None:
    try:
        actions.do_step_turn(step_pk, turn)
    except Exception as exc:
        # A bug or a broken tool must not leave the run waiting forever.
        log.exception("turn %s of step %s failed", turn, step_pk)
        actions.do_fail_step(step_pk, f"internal error: {type(exc).__name__}: {exc}")


@shared_task
def wake_coordinator(run_id: int) -> None:
    actions.do_coordinator_wake(run_id)


@shared_task
def resume_step(step_pk: int) -> None:
    try:
        actions.do_resume_turn(step_pk)
    except Exception as exc:
        log.exception("resuming step %s failed", step_pk)
        actions.do_fail_resume(step_pk, f"internal error: {type(exc).__name__}: {exc}")


@shared_task
def judge_loop(loop_pk: int, iteration: int) -> None:
    from runs.actions.containers import do_judge_loop

    do_judge_loop(loop_pk, iteration)


@shared_task
def deliver_child_result(child_run_id: int) -> None:
    from runs.actions.children import do_deliver_child_result

    do_deliver_child_result(child_run_id)


@shared_task
def execute_approved_call(approval_id: int) -> None:
    from runs.actions.approvals import do_execute_approved_call

    do_execute_approved_call(approval_id)


@shared_task
def execute_tool_call(call_pk: int) -> None:
    from runs.actions.tool_tasks import do_execute_tool_call, do_fail_tool_call

    try:
        do_execute_tool_call(call_pk)
    except Exception as exc:
        # A bug must not leave the step waiting for this call forever.
        log.exception("tool call %s failed", call_pk)
        do_fail_tool_call(call_pk, f"internal error: {type(exc).__name__}: {exc}")
