"""A step's attempt: how long it may run, what follows when it fails, and
how often its model calls are tried again (zenflow's).

Its time limit is its own ``timeout`` when it has one, else
``options.stepTimeout``; past it, counted from the start of the step's
attempt, the step fails with the limit named. Time spent waiting for a
person to answer the step's questions does not count (agents/core/gates.py).

A step whose attempt failed (past its time limit or otherwise) runs again
as a fresh attempt while it has ``retries`` left (``RetryStep``); past them
it fails (``FailStep``), and only then does the failure policy follow."""

from __future__ import annotations

from typing import NamedTuple

from agents.core.decisions import FailStep, RetryStep
from agents.core.happenings import AttemptFailed


class StepLimit(NamedTuple):
    """How long a step may run (``seconds``) and which field said so."""

    seconds: float
    field: str  # "timeout" (the step's own) or "options.stepTimeout"


def step_limit(own: float | None, default: float | None) -> StepLimit | None:
    """The limit of a step whose own ``timeout`` is ``own``, in a workflow
    whose ``options.stepTimeout`` is ``default``; None: it has none. A
    step's own limit wins over the workflow's, longer or shorter."""
    if own is not None and own > 0:
        return StepLimit(own, "timeout")
    if default is not None and default > 0:
        return StepLimit(default, "options.stepTimeout")
    return None


def overdue(step_id: str, ran: float, limit: StepLimit | None, waited: float = 0.0) -> str | None:
    """Why step ``step_id``, which has run ``ran`` seconds, ``waited`` of
    them for a person to answer its questions (not counted), is past
    ``limit``, or None."""
    if limit is None or ran - waited < limit.seconds:
        return None
    spent = f"ran {ran - waited:.1f}s" + (f" (not counting {waited:.1f}s waiting for answers)" if waited else "")
    return f"step {step_id} {spent}, past {limit.field} ({limit.seconds:g}s)"


def after_failed_attempt(failed: AttemptFailed) -> tuple[RetryStep | FailStep, ...]:
    """Retry ``failed.step_id`` or fail it."""
    if failed.attempt < failed.retries:
        return (RetryStep(failed.step_id, failed.attempt + 1, failed.error),)
    return (FailStep(failed.step_id, failed.error),)


def model_call_retries(own: int | None, default: int | None) -> int | None:
    """How many times a model call of a step is tried again after a
    transient provider error (zenflow's ``maxRetries``): the step's own,
    else ``options.maxRetries``; None: the provider's own budget."""
    return own if own is not None else default
