"""A step's ``retries`` (zenflow's): a step whose attempt failed runs again
as a fresh attempt while it has retries left (``RetryStep``); past them it
fails (``FailStep``), and only then does the failure policy follow."""

from __future__ import annotations

from agents.core.decisions import FailStep, RetryStep
from agents.core.happenings import AttemptFailed


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
