"""What ``decide`` (agents/core/machine.py) can decide: runs/ applies each
(runs/actions/scheduling.py, step_ends.py, ending.py, deadlines.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class StartSteps:
    """Start ``step_ids`` (each pending -> running once). ``needs_run_lock``:
    starts that race could pass a cap, so the caller decides again under the
    run's lock; without it, a conditional UPDATE per step is enough."""

    step_ids: tuple[str, ...]
    needs_run_lock: bool = True


@dataclass(frozen=True)
class StopSteps:
    """A failure policy's effect: ``step_ids`` end ``status``; their mail
    drops as ``drop``; ``aborted``: the whole run was aborted."""

    step_ids: tuple[str, ...]
    status: Literal["cancelled", "skipped"]
    drop: Literal["target_terminal", "workflow_cancelled"]
    aborted: bool = False


@dataclass(frozen=True)
class SkipStep:
    """Pending step ``step_id`` does not run: its ``condition`` is false (or
    reads what no finished step gave), said in its step_skipped event as
    ``reason``. Its dependents go on as after a completed step.
    ``missing_data``: the condition read what no finished step gave (zenflow
    says so in a ``message`` too)."""

    step_id: str
    reason: str
    missing_data: bool = False
    others: tuple[str, ...] = ()  # the rest of a loop whose condition skips it whole


@dataclass(frozen=True)
class WakeCoordinator:
    reason: Literal["plan", "finish"]


@dataclass(frozen=True)
class EndRun:
    """End the run ``status``, for ``error``: its unfinished steps are
    cancelled, their mail dropped as ``drop``, and its coordinator ends
    ``coordinator_status``."""

    status: Literal["completed", "partial", "failed", "cancelled", "blocked"]
    error: str = ""

    @property
    def drop(self) -> Literal["target_terminal", "workflow_cancelled"]:
        """A run a person stopped (cancelled, or refused its approval) drops
        its steps' mail as workflow-cancelled; a failed one as target-terminal."""
        return "workflow_cancelled" if self.status in ("cancelled", "blocked") else "target_terminal"

    @property
    def coordinator_status(self) -> str:
        return coordinator_end(self.status)


def coordinator_end(run_status: str) -> str:
    """How the coordinator ends, by its run's end status: it lives as long as
    its run and ends the way the run did (a partial run's coordinator
    completed its part)."""
    return _COORDINATOR_END.get(run_status, "completed")


_COORDINATOR_END = {
    "blocked": "cancelled",
    "completed": "completed",
    "partial": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


@dataclass(frozen=True)
class StartRun:
    """A destructive workflow approved: the run leaves awaiting_approval, once."""


@dataclass(frozen=True)
class RunApprovedCall:
    """Run the approved tool call with exactly its approved arguments."""


@dataclass(frozen=True)
class RefuseCall:
    """The call is not run: ``reason`` is its result."""

    reason: str


@dataclass(frozen=True)
class FailStep:
    step_id: str
    error: str
    others: tuple[str, ...] = ()  # the rest of a loop whose condition failed to evaluate


@dataclass(frozen=True)
class NextTurn:
    """The step takes another turn (its model asked for one: tool results to read)."""


@dataclass(frozen=True)
class WakeAgain:
    """The step answered while mail arrived for it: it takes wake cycle
    ``cycle`` (of ``max_cycles``) to read it; ``warn``: this cycle is the
    one at 80% of the cap (warning_cycle), which is said with a warning."""

    cycle: int
    max_cycles: int
    warn: bool = False


@dataclass(frozen=True)
class DropMail:
    """The step's mailbox closes: what waits unread in it and every later
    message drop with ``reason``."""

    reason: Literal["max_wake_cycles", "hold_timeout"]


@dataclass(frozen=True)
class CompleteStep:
    """The step completed with its answer."""


@dataclass(frozen=True)
class AwaitCalls:
    """The step waits for its calls' results (tasks, a child run, a person);
    ``unread``: mail reached it meanwhile, and a cancel in it is acted on now."""

    unread: bool = False


@dataclass(frozen=True)
class DropMessage:
    """The message is not delivered: it drops with ``reason``."""

    reason: Literal["target_terminal", "resume_shutdown", "no_transcript", "transcript_too_large", "max_wake_cycles"]


@dataclass(frozen=True)
class ResumeStep:
    """The message waits for a resumed turn of its completed step: resume
    number ``resume``; ``starts``: this message starts it (else it joins the
    resume under way)."""

    resume: int
    starts: bool


@dataclass(frozen=True)
class CoordinatorRounds:
    """The coordinator's model turns for ``reason``: plan the run, route its
    messages, or finish (give the run's result); its wake cycle ``cycle``,
    ``warn`` at 80% of its cap (warning_cycle)."""

    reason: Literal["plan", "messages", "finish"]
    cycle: int
    max_cycles: int
    warn: bool = False


@dataclass(frozen=True)
class FinishRun:
    """The coordinator has said its last word on a run whose steps are all
    done: the run ends (its status: ``CoordinatorFinished``)."""


@dataclass(frozen=True)
class LastRound:
    """The coordinator has said its last word for this wake (an answer, or
    finalize): it is not asked again, and the wake goes idle."""


@dataclass(frozen=True)
class EndLoop:
    """Repeat-until loop ``loop_id`` ends ``status``, for ``reason`` (its
    loop_end event; a failed loop's error, its failure policy after)."""

    loop_id: str
    status: Literal["completed", "failed"]
    reason: str


@dataclass(frozen=True)
class AskJudge:
    """Ask loop ``loop_id``'s untilAgent ``agent`` whether iteration
    ``iteration`` ended it, then decide again with its verdict."""

    loop_id: str
    iteration: int
    agent: str


@dataclass(frozen=True)
class NextIteration:
    """Start iteration ``iteration`` of loop ``loop_id``, after ``delay``
    seconds (zenflow's loop ``delay``; 0: at once)."""

    loop_id: str
    iteration: int
    delay: float = 0.0


IterationDecision = EndLoop | AskJudge | NextIteration


@dataclass(frozen=True)
class RetryStep:
    """Step ``step_id`` runs again as attempt ``attempt`` (1 the first
    retry): a fresh transcript, its own maxTurns and timeout, its tool calls
    journaled apart from the failed attempt's, which failed with ``error``."""

    step_id: str
    attempt: int
    error: str


@dataclass(frozen=True)
class AnswerCall:
    """The waiting ask_person call gets its result: ``answer`` given by
    ``by``, or (``answered`` False) none, for ``reason``."""

    answered: bool
    answer: str = ""
    by: str = ""
    reason: str = ""


@dataclass(frozen=True)
class RefuseAnswer:
    """The answer is not taken (``reason``); the question stays open."""

    reason: str


Decision = (
    StartSteps
    | StopSteps
    | SkipStep
    | WakeCoordinator
    | EndRun
    | StartRun
    | RunApprovedCall
    | RefuseCall
    | FailStep
    | NextTurn
    | WakeAgain
    | DropMail
    | CompleteStep
    | AwaitCalls
    | DropMessage
    | ResumeStep
    | CoordinatorRounds
    | FinishRun
    | LastRound
    | EndLoop
    | AskJudge
    | NextIteration
    | RetryStep
    | AnswerCall
    | RefuseAnswer
)
TurnDecision = FailStep | NextTurn | WakeAgain | DropMail | CompleteStep | AwaitCalls
