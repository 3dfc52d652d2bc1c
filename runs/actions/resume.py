"""Resumes: one more turn of a completed step, for the messages forwarded to
it since; its answer goes back to the coordinator as a resume_reply."""

from __future__ import annotations

from django.db import transaction

from agents import telemetry
from agents.events import Event as RuntimeEvent
from agents.events.run_events import ResumeCompleted, ResumeFailed
from agents.llm import ProviderError
from agents.router import DropReason, MessageType
from agents.runner import (
    apply_completion,
    build_request,
)
from runs.actions.catalog import REGISTRY, workflow_spec
from runs.actions.common import router_for, save_turn
from runs.actions.model_calls import agent_of, ask, build_agent_turn, turn_variables
from runs.actions.step_ends import run_of, schedule_after_commit
from runs.actions.tool_host import tool_env
from runs.models import Run, Step
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork


def do_resume_turn(step_pk: int) -> None:
    """One more turn of a completed step, for the messages forwarded to it
    since. Its answer goes back to the coordinator as a resume_reply."""
    step = store().step_for_turn(step_pk)
    if step is None:
        raise Step.DoesNotExist(f"step {step_pk} does not exist")
    run = step.run
    if not step.resuming:
        return
    if run.status != Run.Status.RUNNING:
        store().end_resume(step.pk)
        return
    mailboxes = DjangoMailboxStore(run.pk)
    inbox = mailboxes.unread(step.step_id)
    agent = agent_of(workflow_spec(run.workflow), step)
    agent_turn = build_agent_turn(step, agent, turn_variables(run, step, inbox))
    agent_turn.env = tool_env(run, step)
    agent_turn.empty_answer_retries = None  # one answer: an empty one replies "(no answer)"
    # One answer, no tools: a resumed step replies; it does not start work.
    request = build_request(agent_turn, [], inbox)
    try:
        with telemetry.agent_span(run.trace_context, run.pk, step.agent, step.step_id):
            completion = ask(agent, request, run.pk, step.step_id)
    except ProviderError as exc:
        do_fail_resume(step.pk, str(exc))
        return
    with transaction.atomic(), UnitOfWork(run.pk) as uow:
        uow.lock_run()
        if not store().count_resume_turn(step):
            return
        router = router_for(run.pk, uow=uow)
        result = apply_completion(agent_turn, request, completion, inbox, router=router, registry=REGISTRY, tools=[])
        save_turn(step, result)
        reply = router.send(step.step_id, result.output or "(no answer)", MessageType.RESUME_REPLY)
        completed = ResumeCompleted(reply=result.output[:2000], message_id=reply.message_id)
        uow.sink.emit(RuntimeEvent.of(completed, step.step_id))
        store().end_resume(step.pk)
        # Messages forwarded while this resume ran have no turn to read them.
        router.drop_unread(step.step_id, DropReason.TARGET_TERMINAL)
        schedule_after_commit(run.pk)


def do_fail_resume(step_pk: int, error: str) -> None:
    """A resume that could not answer: say why, drop what it was given."""
    with transaction.atomic(), UnitOfWork(run_of(step_pk)) as uow:
        uow.lock_run()
        step = Step.objects.get(pk=step_pk)
        if not store().end_resume(step.pk):
            return
        uow.sink.emit(RuntimeEvent.of(ResumeFailed(error=error), step.step_id))
        router_for(step.run_id, uow=uow).drop_unread(step.step_id, DropReason.TARGET_TERMINAL)
        schedule_after_commit(step.run_id)
