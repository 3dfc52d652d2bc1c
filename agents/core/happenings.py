"""What can happen in a run: what runs/ tells ``decide``
(agents/core/machine.py). A new rule starts as a new happening here, a new
case in ``decide``, and the decisions it returns (agents/core/decisions.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class RunStarted:
    pass


@dataclass(frozen=True)
class StepEnded:
    """``step_id`` ended with ``status`` (the state already shows it)."""

    step_id: str
    status: str


@dataclass(frozen=True)
class CoordinatorIdle:
    pass


@dataclass(frozen=True)
class StepsChanged:
    """A loop moved on, a resume ended: steps may start that could not."""


@dataclass(frozen=True)
class CoordinatorFinished:
    """The coordinator said its last word on a run whose steps are all
    done (its finish wake, or a finalize it had called before).
    ``owes_workers``: its workflow's coordinator must plan workers
    (coordinator.requireWorkers) and it spawned none."""

    owes_workers: bool = False


@dataclass(frozen=True)
class RunFailed:
    """Something the run cannot go past: its coordinator's error, a start
    that could not be made, a workflow that could not be run."""

    error: str


@dataclass(frozen=True)
class RunCancelled:
    """A person, the command line or a parent run's end cancelled the run."""

    reason: str


@dataclass(frozen=True)
class ApprovalDecided:
    """A decision on an approval: ``approvals`` counts the approve decisions
    so far, this one included; ``required`` how many it needs (two under
    the two-person rule). A lapse is the expiry passing with no decision."""

    kind: Literal["workflow", "tool"]
    decision: Literal["approve", "reject", "lapse"]
    reason: str = ""
    approvals: int = 0
    required: int = 1


@dataclass(frozen=True)
class DeadlinePassed:
    """``deadline``: the run's (``options.timeout``, or a budget spent) or
    a step's (``options.stepTimeout``); ``why`` says which and by how much."""

    deadline: Literal["run", "step"]
    why: str
    step_id: str = ""


@dataclass(frozen=True)
class TurnDue:
    """Turn ``turn`` of step ``step_id`` is about to ask its model; the
    workflow allows ``max_turns`` (options.maxTurns)."""

    step_id: str
    turn: int
    max_turns: int


@dataclass(frozen=True)
class WakeCount:
    """A step's wake cycles (turns taken to read mail that came after it
    answered) against its cap, and how long it has held its answer for
    that mail (seconds; 0 before its first wake cycle) against the hold
    timeout (0: none)."""

    cycles: int
    max_cycles: int
    held_for: float = 0.0
    hold_timeout: float = 0.0


@dataclass(frozen=True)
class ToolUse:
    """A turn's tool calls, counted against the caps: ``cap_exhausted``, it
    asked for calls with none left under maxToolCalls (``max_calls``); the
    run's counted calls so far against maxRunToolCalls; ``recent_turns``,
    how many calls worked in each of the step's latest turns with finished
    calls, newest first (at most ``max_failed_turns`` of them), against
    maxConsecutiveToolFailures."""

    cap_exhausted: bool
    max_calls: int
    run_calls: int
    max_run_calls: int
    recent_turns: tuple[int, ...]
    max_failed_turns: int


@dataclass(frozen=True)
class TurnAnswered:
    """Step ``step_id``'s turn is recorded with ``status`` (the runner's:
    continue, completed, waiting for its calls' results, failed with
    ``error``); ``unread`` messages wait in its mailbox. ``wake``: its wake
    cycles, when mail waits; ``tools``: its tool calls, when it made any."""

    step_id: str
    status: Literal["continue", "completed", "waiting", "failed"]
    error: str = ""
    unread: int = 0
    wake: WakeCount | None = None
    tools: ToolUse | None = None


@dataclass(frozen=True)
class ForwardToEnded:
    """The coordinator forwarded a message to step ``step_id``, whose mailbox
    closed when it ended ``status``. ``run_going_on``: the run is running
    and its coordinator not in its finish wake. ``transcript_bytes``: the
    size of its transcript as JSON (0: it has none). ``resumes``: how many
    times it was resumed, against ``max_resumes`` (its wake-cycle cap);
    ``resuming``: a resume of it is under way."""

    step_id: str
    status: str
    run_going_on: bool
    transcript_bytes: int
    max_transcript_bytes: int
    resumes: int
    max_resumes: int
    resuming: bool = False


@dataclass(frozen=True)
class CoordinatorWoke:
    """The coordinator's wake holds the run (the state shows its steps):
    ``plans_first``, it can spawn workers and has not planned; ``unread``
    messages wait for it; ``cycles`` wakes it has taken, against
    ``max_cycles`` (options.maxWakeCycles); ``finalized``: it has given the
    run's result already."""

    plans_first: bool
    unread: int
    cycles: int
    max_cycles: int
    finalized: bool = False


@dataclass(frozen=True)
class CoordinatorAnswered:
    """A round of the coordinator's wake for ``reason`` is recorded with
    ``status`` (the runner's); ``finalized``: it called finalize;
    ``owes_workers``: its workflow's coordinator must plan workers and has
    spawned none; ``spawned``: this wake spawned workers, which have yet to
    run."""

    reason: Literal["plan", "messages", "finish"]
    status: Literal["continue", "completed", "waiting", "failed"]
    finalized: bool = False
    owes_workers: bool = False
    spawned: bool = False


@dataclass(frozen=True)
class WorkerAsked:
    """The coordinator asks for a worker (spawn_worker) that waits for
    ``depends_on`` (the state shows those steps), in its wake for
    ``reason``, the ``cycle``-th of its ``max_cycles`` (options.maxWakeCycles)."""

    depends_on: tuple[str, ...]
    reason: Literal["plan", "messages", "finish"]
    cycle: int
    max_cycles: int


@dataclass(frozen=True)
class IterationEnded:
    """Iteration ``iteration`` (0-based) of repeat-until loop ``loop_id``
    ended: every step of it ``completed``, or not. ``output`` is its last
    inner step's (``last_id``). ``until``: the loop's, CEL when ``until_is_cel``
    (read over ``variables``, zenflow's), else text the output contains.
    ``judge``: its untilAgent, whose ``verdict`` is None until it was asked.
    ``delay``: the loop's wait between iterations."""

    loop_id: str
    iteration: int
    max_iterations: int
    completed: bool = True
    last_id: str = ""
    output: str = ""
    until: str | None = None
    until_is_cel: bool = False
    variables: Mapping[str, Any] = field(default_factory=dict)
    judge: str | None = None
    verdict: bool | None = None
    delay: float = 0.0


@dataclass(frozen=True)
class AttemptFailed:
    """Attempt ``attempt`` (0 the first) of step ``step_id`` failed with
    ``error``; the step may be retried ``retries`` times (its ``retries``)."""

    step_id: str
    attempt: int
    retries: int
    error: str


@dataclass(frozen=True)
class QuestionClosed:
    """A question a step asked a person (ask_person) closes: ``answered``
    with ``answer`` by ``by`` (who may answer was checked before), or
    ``lapsed`` for ``reason`` (its wait timed out, its step or run ended).
    ``options``: the answers offered (empty: any text); ``max_chars``: the
    longest answer taken."""

    how: Literal["answered", "lapsed"]
    answer: str = ""
    by: str = ""
    reason: str = ""
    options: tuple[str, ...] = ()
    max_chars: int = 4000


Happening = (
    RunStarted
    | StepEnded
    | CoordinatorIdle
    | StepsChanged
    | CoordinatorFinished
    | RunFailed
    | RunCancelled
    | ApprovalDecided
    | DeadlinePassed
    | TurnDue
    | TurnAnswered
    | ForwardToEnded
    | CoordinatorWoke
    | CoordinatorAnswered
    | WorkerAsked
    | IterationEnded
    | AttemptFailed
    | QuestionClosed
)
