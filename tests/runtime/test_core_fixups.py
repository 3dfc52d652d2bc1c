"""The coordinator iterates, through ``decide`` (agents/core/wakes.py,
machine.py): a finish that spawns workers lets them run and is woken again
with their results; a spawn that could not run, or whose result no wake is
left to read, is refused with why; a run never ends completed or partial
while a step is still to run. Without Django."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import (
    CoordinatorRounds,
    EndRun,
    FinishRun,
    LastRound,
    RefuseCall,
    StartSteps,
    WakeCoordinator,
)
from agents.core.happenings import CoordinatorAnswered, CoordinatorWoke, WorkerAsked
from agents.core.machine import (
    CoordinatorFinished,
    CoordinatorIdle,
    CoordinatorState,
    RunCancelled,
    RunFailed,
    RunState,
    StepEnded,
    StepState,
)
from tests.runtime.test_core_machine import runs

STEP_STATUSES = ("pending", "running", "completed", "failed", "skipped", "cancelled")
REASONS = ("plan", "messages", "finish")


@settings(max_examples=300, deadline=None)
@given(runs(), st.data())
def test_a_run_never_ends_completed_or_partial_while_a_step_is_still_to_run(state, data):
    happened = data.draw(
        st.sampled_from(
            [
                CoordinatorFinished(),
                CoordinatorFinished(owes_workers=True),
                RunFailed("boom"),
                RunCancelled("stop"),
                CoordinatorIdle(),
                *(StepEnded(s.runtime_id, s.status) for s in state.steps if s.terminal),
            ]
        )
    )

    ends = [d for d in machine.decide(state, happened) if isinstance(d, EndRun)]

    if any(not s.terminal for s in state.steps):
        assert all(end.status not in ("completed", "partial") for end in ends)
        if isinstance(happened, CoordinatorFinished):
            assert ends == []  # the run goes on: the step's end wakes the coordinator to finish again


@given(
    st.sampled_from(REASONS),
    st.sampled_from(["continue", "completed", "waiting", "failed"]),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_a_finish_that_spawned_workers_ends_its_wake_and_not_the_run(reason, status, finalized, owes, spawned):
    decisions = machine.decide(RunState("running"), CoordinatorAnswered(reason, status, finalized, owes, spawned))

    last = status != "failed" and (status == "completed" or finalized)
    assert (LastRound() in decisions) == last
    assert (FinishRun() in decisions) == (last and reason == "finish" and not owes and not spawned)


@given(
    st.lists(st.sampled_from(STEP_STATUSES), max_size=5),
    st.sets(st.integers(0, 4), max_size=3),
    st.sampled_from(REASONS),
    st.integers(1, 12),
    st.integers(1, 10),
    st.sampled_from(["running", "running", "completed", "cancelled", "pending"]),
)
def test_a_spawn_is_refused_with_why_when_the_worker_could_not_run_or_be_read(
    statuses, picked, reason, cycle, cap, run_status
):
    steps = tuple(StepState(f"s{n}", status) for n, status in enumerate(statuses))
    depends_on = tuple(f"s{n}" for n in sorted(picked) if n < len(steps))
    asked = WorkerAsked(depends_on, reason, cycle, cap)

    decisions = machine.decide(RunState(run_status, steps), asked)

    never = [
        s.runtime_id for s in steps if s.runtime_id in depends_on and s.status in ("failed", "cancelled", "skipped")
    ]
    past_cap = reason != "plan" and cycle >= cap
    if run_status != "running":
        assert decisions == (RefuseCall(f"the run is {run_status}: no worker can start in it"),)
    elif never:
        (refused,) = decisions
        assert isinstance(refused, RefuseCall) and "would never start" in refused.reason
        assert all(step_id in refused.reason for step_id in never)
    elif past_cap:
        (refused,) = decisions
        assert isinstance(refused, RefuseCall)
        assert f"taken {cycle} of its {cap} wake cycles (maxWakeCycles)" in refused.reason
    else:
        assert decisions == ()


def _play(cap: int, wants_fix_ups: int) -> tuple[str, list[str], int]:
    """A coordinator that plans one worker, then at every finish spawns a
    fix-up while it wants one, driven through ``decide`` as runs/ applies
    it: the run's end status, its steps' statuses, the wakes taken."""
    steps: list[StepState] = []
    cycles = 0
    for _ in range(100):
        coordinator = CoordinatorState(plans_first=cycles == 0)
        state = RunState("running", tuple(steps), coordinator, steps_may_be_added=True)
        scheduled = machine.decide(state, CoordinatorIdle())
        for decision in scheduled:
            if isinstance(decision, StartSteps):  # each worker runs to completion
                steps = [s._replace(status="completed") if s.runtime_id in decision.step_ids else s for s in steps]
        if any(isinstance(d, WakeCoordinator) for d in scheduled):
            cycles, end = _wake(steps, cycles, cap, wants_fix_ups)
            if end is not None:
                return end.status, [s.status for s in steps], cycles
    raise AssertionError("the run never ended")


def _wake(steps: list[StepState], cycles: int, cap: int, wants_fix_ups: int) -> tuple[int, EndRun | None]:
    """One wake of that coordinator (``steps`` grows by what it spawns):
    the cycles taken, and the run's end if it ended."""
    woke = CoordinatorWoke(cycles == 0, 0, cycles, cap)
    for decision in machine.decide(RunState("running", tuple(steps)), woke):
        if isinstance(decision, CoordinatorRounds):
            cycles = decision.cycle
            wants = decision.reason == "plan" or len(steps) - 1 < wants_fix_ups
            asked = WorkerAsked((), decision.reason, decision.cycle, cap)
            spawned = wants and not machine.decide(RunState("running", tuple(steps)), asked)
            if spawned:
                steps.append(StepState(f"worker-{len(steps) + 1}"))
            answered = CoordinatorAnswered(decision.reason, "completed", spawned=spawned)
            if FinishRun() in machine.decide(RunState("running"), answered):
                (end,) = machine.decide(RunState("running", tuple(steps)), CoordinatorFinished())
                return cycles, end
        elif isinstance(decision, FinishRun):
            # The finish after the rounds: the run goes on while a worker is still to run.
            ends = machine.decide(RunState("running", tuple(steps)), CoordinatorFinished())
            return cycles, (ends[0] if ends else None)
    return cycles, None


@given(st.integers(1, 10), st.integers(0, 12))
def test_a_coordinator_that_keeps_spawning_fix_ups_ends_completed_within_its_wake_cycles(cap, wants):
    status, statuses, wakes = _play(cap, wants)

    assert status == "completed"
    assert statuses and all(s == "completed" for s in statuses)
    # The plan and a finish always; a fix-up per finish before the cap.
    assert wakes == max(2, min(cap, wants + 2)) <= max(2, cap)
    assert len(statuses) == 1 + max(0, min(wants, cap - 2))
