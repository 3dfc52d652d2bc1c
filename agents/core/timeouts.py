"""A step's time limit (zenflow's): its own ``timeout`` when it has one,
else ``options.stepTimeout``; past it, counted from the start of the
step's attempt, the step fails with the limit named. What follows the
failure (a retry, the failure policy) is decided as for any failed
attempt. Time spent waiting for a person to answer the step's questions
does not count (agents/core/gates.py, retries.py)."""

from __future__ import annotations

from typing import NamedTuple


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
