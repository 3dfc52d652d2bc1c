"""A run as it was at one event: rebuilt from its event log alone, so a
scrubber can step through a finished (or running) run.

The rows of Step and Message hold only the latest state; the events hold
every change, in order. ``state_at`` folds events 1..seq into a
``ReplayState``; ``runs.graph.graph_of`` draws it with the same partial as the
live page.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Max

from agents import ids
from agents.core.decisions import coordinator_end
from agents.events import parse
from agents.events.run_events import (
    AgentIdle,
    AgentWake,
    Error,
    LoopEnd,
    LoopIteration,
    MessageDropped,
    MessageSent,
    StepCancelled,
    StepEnd,
    StepReused,
    StepSkipped,
    StepStart,
    WorkerSpawned,
    WorkflowEnd,
    WorkflowStart,
)
from agents.events.tool_events import ApprovalRequested, ChildRunLinked
from agents.router import COORDINATOR
from runs.actions.containers import repeat_loop_of
from runs.graph import GRAPH_STEP_FIELDS, child_runs, graph_of, graph_step
from runs.graph_shapes import ChildRun, Graph, GraphStep
from runs.models import Event, Run, Step

# The latest events shown under the graph.
RECENT_EVENTS = 8


@dataclass
class ReplayStep:
    step_id: str
    kind: str = Step.Kind.STEP
    agent: str = ""
    status: str = Step.Status.PENDING


@dataclass
class ReplayState:
    """Everything the event log says up to and including ``seq``. ``traffic``
    counts messages as Message rows do: by sender, recipient and drop
    reason ("" while delivered), so a stored message dropped later unread
    moves from its delivered count to its dropped one."""

    run_id: int
    seq: int = 0
    last_seq: int = 0
    run_status: str = Run.Status.PENDING
    coordinator_status: str = Step.Status.PENDING
    coordinator_working: bool = False
    steps: dict[str, ReplayStep] = field(default_factory=dict)
    traffic: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    events: list[Event] = field(default_factory=list)
    # What never changes of a step (dependencies, spawner, container), from its row.
    rows: dict[str, Step] = field(default_factory=dict, repr=False)
    # The run's child runs, and those linked by the events so far.
    children: list[ChildRun] = field(default_factory=list, repr=False)
    linked: set[int] = field(default_factory=set)
    _sent: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)

    @property
    def event(self) -> Event | None:
        """The event at ``seq``."""
        return self.events[-1] if self.events else None

    @property
    def recent_events(self) -> list[Event]:
        return self.events[-RECENT_EVENTS:]

    @property
    def ordered_steps(self) -> list[ReplayStep]:
        """Steps under their top-level container, as the graph places them."""
        return [self.steps[step_id] for step_id in in_display_order(list(self.steps))]

    @property
    def statuses(self) -> dict[str, str]:
        """Step id -> status, the coordinator included once the run started."""
        found = {step_id: step.status for step_id, step in self.steps.items()}
        if self.run_status not in (Run.Status.PENDING, Run.Status.AWAITING_APPROVAL):
            found[COORDINATOR] = self.coordinator_status
        return found

    @property
    def graph(self) -> Graph:
        steps = [self._graph_step(self.steps[step_id]) for step_id in in_display_order(list(self.steps))]
        children = [child for child in self.children if child.run_id in self.linked]
        return graph_of(self.coordinator_status, self.coordinator_working, steps, self.traffic, children)

    def _graph_step(self, step: ReplayStep) -> GraphStep:
        row = self.rows.get(step.step_id)
        if row is None:
            return GraphStep(step.step_id, step.agent, step.status, step.kind, step.status == Step.Status.RUNNING)
        return graph_step(row, step.status)

    def apply(self, event: Event) -> None:
        """Move the state past one event."""
        match parse(event.type, event.data):
            case WorkflowStart(steps=steps):
                self.run_status = Run.Status.RUNNING
                self.coordinator_status = Step.Status.RUNNING
                for step_id in steps:
                    self._add(step_id)
            case WorkerSpawned(agent=agent):
                self._add(event.step_id).agent = agent
            case LoopIteration(steps=steps):
                for step_id in steps:
                    self._add(step_id)
            case StepStart(agent=agent):
                step = self._add(event.step_id)
                step.status = Step.Status.RUNNING
                step.agent = agent or step.agent
            case StepEnd(status=status) | LoopEnd(status=status):
                self._add(event.step_id).status = status or Step.Status.COMPLETED
            case StepReused():
                self._add(event.step_id).status = Step.Status.COMPLETED
            case StepSkipped(status=status):
                self._add(event.step_id).status = status or Step.Status.SKIPPED
            case StepCancelled():
                self._add(event.step_id).status = Step.Status.CANCELLED
            case Error() if event.step_id and event.step_id != COORDINATOR:
                self._add(event.step_id).status = Step.Status.FAILED
            case AgentWake() | AgentIdle() as woke_or_idle if event.step_id == COORDINATOR:
                self.coordinator_working = isinstance(woke_or_idle, AgentWake)
            case MessageSent(sender=sender, to=recipient, message_id=message_id):
                self.traffic[(sender, recipient, "")] += 1
                self._sent[message_id] = (sender, recipient)
            case MessageDropped(sender=sender, to=recipient, message_id=message_id, reason=reason):
                # A message that was stored and is dropped later (its mailbox
                # closed unread) is one Message row: no longer delivered.
                if self._sent.pop(message_id, None):
                    self.traffic[(sender, recipient, "")] -= 1
                self.traffic[(sender, recipient, reason)] += 1
            case ChildRunLinked(run_id=child):
                self.linked.add(child)
            case ApprovalRequested(kind="workflow") if self.run_status == Run.Status.PENDING:
                self.run_status = Run.Status.AWAITING_APPROVAL
            case WorkflowEnd(status=status):
                self.run_status = status or Run.Status.COMPLETED
                self.coordinator_status = coordinator_end(self.run_status)
                self.coordinator_working = False
                # Ending a run cancels its unfinished steps without an event each.
                for step in self.steps.values():
                    if step.status not in Step.TERMINAL:
                        step.status = Step.Status.CANCELLED
        self.seq = event.seq
        self.events.append(event)

    def _add(self, step_id: str) -> ReplayStep:
        """The step, created pending (after the row of the repeat-until loop
        it runs in, which is running from the moment it exists)."""
        if step_id in self.steps:
            return self.steps[step_id]
        try:
            loop_id = repeat_loop_of(step_id)
        except ValueError:
            loop_id = None
        if loop_id and loop_id not in self.steps:
            self.steps[loop_id] = ReplayStep(loop_id, Step.Kind.LOOP, status=Step.Status.RUNNING)
        self.steps[step_id] = ReplayStep(step_id)
        return self.steps[step_id]


def in_display_order(step_ids: list[str]) -> list[str]:
    """Steps under their top-level container, in order of first appearance:
    a loop's later iterations come after the steps that follow the loop, but
    sit inside it (as runs.live.in_display_order does for Step rows)."""
    first: dict[str, int] = {}
    for n, step_id in enumerate(step_ids):
        first.setdefault(_top(step_id), n)
    return [step_id for _, step_id in sorted(enumerate(step_ids), key=lambda item: (first[_top(item[1])], item[0]))]


def _top(step_id: str) -> str:
    try:
        return ids.parse(step_id)[0].id
    except ValueError:
        return step_id


def last_seq(run: Run) -> int:
    return run.events.aggregate(last=Max("seq"))["last"] or 0


def state_at(run: Run, seq: int | None = None) -> ReplayState:
    """The run as its events 1..``seq`` describe it (``seq`` is clamped to
    the log, 1..last, as the scrubber is; None means the last event)."""
    last = last_seq(run)
    seq = last if seq is None else max(min(1, last), min(seq, last))
    rows = {step.step_id: step for step in run.steps.only(*GRAPH_STEP_FIELDS)}
    state = ReplayState(run.pk, last_seq=last, rows=rows, children=child_runs(run))
    for event in run.events.filter(seq__lte=seq).order_by("seq"):
        state.apply(event)
    # A step's agent never changes, but a step that has not started yet has
    # no event naming it: take it from the step's row.
    for step in state.steps.values():
        if not step.agent and step.kind == Step.Kind.STEP and step.step_id in rows:
            step.agent = rows[step.step_id].agent
    return state


def replay_context(run: Run, seq: int | None = None) -> dict:
    """What runs/templates/runs/replay.html and the graph partial need."""
    state = state_at(run, seq)
    return {"run": run, "replay": state, "graph": state.graph}
