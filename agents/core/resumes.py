"""The rule of a forward to a step that has ended: a completed step is
resumed for one more turn, to read it, when the run goes on, the step has a
transcript within the size cap and resumes left under its wake-cycle cap;
otherwise the message drops, saying why. ``decide``
(agents/core/machine.py) calls it; runs/actions/common.py (``Resumer``)
applies it."""

from __future__ import annotations

from agents.core.decisions import DropMessage, ResumeStep
from agents.core.happenings import ForwardToEnded


def after_forward(forward: ForwardToEnded) -> tuple[DropMessage | ResumeStep]:
    """Resume the step, or drop the message (see the module's docstring)."""
    if forward.status != "completed":
        return (DropMessage("target_terminal"),)
    if not forward.run_going_on:
        return (DropMessage("resume_shutdown"),)
    if not forward.transcript_bytes:
        return (DropMessage("no_transcript"),)
    if forward.transcript_bytes > forward.max_transcript_bytes:
        return (DropMessage("transcript_too_large"),)
    if forward.resumes >= forward.max_resumes:
        return (DropMessage("max_wake_cycles"),)
    if forward.resuming:
        return (ResumeStep(forward.resumes, starts=False),)
    return (ResumeStep(forward.resumes + 1, starts=True),)
