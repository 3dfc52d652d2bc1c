"""The orchestration state machine (agents/core/machine.py), without Django:
examples of each rule, and properties over random runs (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.core.machine import (
    CoordinatorIdle,
    CoordinatorState,
    EndRun,
    RunStarted,
    RunState,
    StartSteps,
    StepEnded,
    StepState,
    StopSteps,
    WakeCoordinator,
)
from agents.core.ready import TERMINAL

STATUSES = ("pending", "running", "completed", "failed", "skipped", "cancelled")


def chain(n: int, **statuses: str) -> RunState:
    steps = tuple(
        StepState(f"s{i}", statuses.get(f"s{i}", "pending"), (f"s{i - 1}",) if i > 1 else ()) for i in range(1, n + 1)
    )
    return RunState("running", steps)


def starts(decisions) -> tuple[str, ...]:
    return next((d.step_ids for d in decisions if isinstance(d, StartSteps)), ())


# -- examples -----------------------------------------------------------------------


def test_a_run_that_starts_starts_its_first_step():
    assert starts(machine.decide(chain(3), RunStarted())) == ("s1",)


def test_a_completion_starts_its_successor_without_the_run_lock_in_a_chain():
    decisions = machine.decide(chain(3, s1="completed"), StepEnded("s1", "completed"))

    assert decisions == (StartSteps(("s2",), needs_run_lock=False),)


def test_dependents_wait_while_the_coordinator_has_mail_or_works():
    state = chain(3, s1="completed")
    for coordinator in (CoordinatorState(has_mail=True), CoordinatorState(busy=True)):
        held = RunState(state.status, state.steps, coordinator)
        assert machine.decide(held, StepEnded("s1", "completed")) == ()


def test_the_last_step_to_end_wakes_the_coordinator_to_finish():
    state = chain(2, s1="completed", s2="completed")

    assert machine.decide(state, StepEnded("s2", "completed")) == (WakeCoordinator("finish"),)


def test_a_coordinator_that_spawns_workers_plans_first():
    state = RunState("running", chain(1).steps, CoordinatorState(plans_first=True), steps_may_be_added=True)

    assert machine.decide(state, RunStarted()) == (
        StartSteps(("s1",), needs_run_lock=True),
        WakeCoordinator("plan"),
    )


def test_an_ended_run_decides_nothing():
    state = RunState("cancelled", chain(2, s1="completed").steps)

    assert machine.decide(state, StepEnded("s1", "completed")) == ()


def test_a_cap_makes_the_start_need_the_run_lock():
    steps = tuple(StepState(f"s{i}") for i in range(4))
    state = RunState("running", steps, max_running=2)

    assert machine.decide(state, RunStarted()) == (StartSteps(("s0", "s1"), needs_run_lock=True),)


def _loop(iterations: int, cap: int, done: int = 0) -> tuple[StepState, ...]:
    """A forEach loop ``map`` of ``iterations`` (the first ``done`` completed,
    the rest running up to the cap), and ``report``, which waits for it."""
    steps = []
    for n in range(iterations):
        status = "completed" if n < done else "running" if n < done + cap else "pending"
        steps.append(StepState(f"map[{n}].work", status, limits=(("map", cap),), position=n))
    finals = tuple(s.runtime_id for s in steps)
    return (*steps, StepState("report", depends_on=finals, position=iterations))


def test_a_loops_cap_needs_the_run_lock_only_while_it_can_hold_an_iteration_back():
    # Seven iterations under a cap of five: once the first ends, the sixth
    # starts, and the seventh still waits for a free slot.
    state = RunState("running", _loop(7, 5), max_running=10).with_status({"map[0].work": "completed"})
    assert machine.decide(state, StepEnded("map[0].work", "completed")) == (
        StartSteps(("map[5].work",), needs_run_lock=True),
    )
    # Five left for a cap of five, or three in all: nothing can be held back.
    state = RunState("running", _loop(7, 5, done=1), max_running=10).with_status({"map[1].work": "completed"})
    assert machine.decide(state, StepEnded("map[1].work", "completed")) == (
        StartSteps(("map[6].work",), needs_run_lock=False),
    )
    last = RunState("running", _loop(3, 5, done=2), max_running=10).with_status({"map[2].work": "completed"})
    assert machine.decide(last, StepEnded("map[2].work", "completed")) == (
        StartSteps(("report",), needs_run_lock=False),
    )


def test_a_freed_slot_starts_a_step_that_is_no_dependent_of_the_one_that_ended():
    steps = (StepState("a", "completed"), StepState("b", "running"), StepState("c"), StepState("d"))
    state = RunState("running", steps, max_running=2)

    assert starts(machine.decide(state, StepEnded("a", "completed"))) == ("c",)


def test_failure_policies_choose_what_happens_to_dependents():
    state = chain(4, s1="completed", s2="failed")
    cascade = machine.decide(state, StepEnded("s2", "failed"))
    skip = machine.decide(
        RunState("running", state.steps, on_step_failure="skip-dependents"), StepEnded("s2", "failed")
    )
    abort = machine.decide(RunState("running", state.steps, on_step_failure="abort"), StepEnded("s2", "failed"))

    assert cascade[0] == StopSteps(("s3", "s4"), "cancelled", "target_terminal")
    assert skip[0] == StopSteps(("s3", "s4"), "skipped", "target_terminal")
    assert abort[0] == StopSteps(("s3", "s4"), "cancelled", "workflow_cancelled", aborted=True)
    # Then every step is done: the coordinator finishes the run.
    assert cascade[1:] == (WakeCoordinator("finish"),)


def test_the_run_end_status_rule():
    def end(*statuses: str) -> EndRun:
        steps = tuple(StepState(f"s{n}", status, error="boom") for n, status in enumerate(statuses))
        return machine.run_end(RunState("running", steps))

    assert end("completed", "skipped") == EndRun("completed")
    assert end("completed", "failed") == EndRun("partial", "step s1 failed: boom")
    assert end("completed", "cancelled") == EndRun("partial")
    assert end("failed", "skipped") == EndRun("failed", "step s0 failed: boom")
    assert end() == EndRun("completed")


# -- properties ---------------------------------------------------------------------


@st.composite
def runs(draw) -> RunState:
    """A run of up to 12 steps: each depends on earlier ones, some in two
    forEach loops with caps; statuses drawn so that running steps had their
    dependencies completed (pending ones anything)."""
    n = draw(st.integers(0, 12))
    steps: list[StepState] = []
    for i in range(n):
        deps = tuple(sorted(draw(st.sets(st.sampled_from([f"s{j}" for j in range(i)]), max_size=3)) if i else ()))
        group = draw(st.sampled_from(["", "a", "b"]))
        limits: tuple[tuple[str, int], ...] = ()
        runtime_id = f"s{i}"
        if group:
            cap = {"a": 1, "b": 2}[group]
            runtime_id = f"{group}[{draw(st.integers(0, 3))}].s{i}"
            limits = ((group, cap),)
        steps.append(StepState(runtime_id, "pending", deps, limits=limits, position=i))
    # Dependencies name the runtime ids.
    names = {f"s{i}": step.runtime_id for i, step in enumerate(steps)}
    steps = [StepState(s.runtime_id, s.status, tuple(names[d] for d in s.depends_on), limits=s.limits) for s in steps]
    status: dict[str, str] = {}
    for step in steps:
        done = all(status[d] == "completed" for d in step.depends_on)
        choices = STATUSES if done else ("pending", "skipped", "cancelled")
        status[step.runtime_id] = draw(st.sampled_from(choices))
    final = tuple(StepState(s.runtime_id, status[s.runtime_id], s.depends_on, limits=s.limits) for s in steps)
    return RunState(
        "running",
        final,
        max_running=draw(st.integers(1, 4)),
        on_step_failure=draw(st.sampled_from(["cascade", "skip-dependents", "abort"])),
    )


def _apply(state: RunState, decisions) -> RunState:
    changes: dict[str, str] = {}
    for decision in decisions:
        if isinstance(decision, StartSteps):
            changes.update(dict.fromkeys(decision.step_ids, "running"))
        elif isinstance(decision, StopSteps):
            changes.update(dict.fromkeys(decision.step_ids, decision.status))
    return state.with_status(changes)


def _settled(state: RunState) -> RunState:
    """The state after a full pass started what it could."""
    return _apply(state, machine.decide(state, CoordinatorIdle()))


def _running(state: RunState) -> int:
    return sum(1 for s in state.steps if s.status == "running")


@settings(max_examples=150, deadline=None)
@given(runs())
def test_it_never_starts_a_step_whose_dependencies_did_not_all_complete(state):
    # A skipped dependency counts as done (a step skipped for its condition,
    # zenflow's rule; a failure policy's skip skips every dependent at once).
    status = {s.runtime_id: s.status for s in state.steps}
    for step_id in starts(machine.decide(state, RunStarted())):
        step = state.step(step_id)
        assert step.status == "pending"
        assert all(status[dep] in ("completed", "skipped") for dep in step.depends_on)


@settings(max_examples=150, deadline=None)
@given(runs())
def test_it_never_starts_more_than_the_caps_allow(state):
    after = _settled(state)
    started = starts(machine.decide(state, RunStarted()))
    assert _running(after) <= max(state.max_running, _running(state))
    if started:
        assert _running(after) <= state.max_running
    for group, cap in {limit for s in state.steps for limit in s.limits}:
        before_open = _open_iterations(state, group)
        assert len(_open_iterations(after, group)) <= max(cap, len(before_open))


def _open_iterations(state: RunState, group: str) -> set[str]:
    members: dict[str, list[StepState]] = {}
    for step in state.steps:
        if step.runtime_id.startswith(group + "["):
            members.setdefault(step.runtime_id.split("]")[0], []).append(step)
    return {
        key
        for key, steps in members.items()
        if any(s.status != "pending" for s in steps) and not all(s.status in TERMINAL for s in steps)
    }


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_the_decision_after_a_completion_equals_a_full_pass(state, data):
    running = [s.runtime_id for s in state.steps if s.status == "running"]
    if not running:
        return
    finished = data.draw(st.sampled_from(running))
    after = state.with_status({finished: "completed"})

    assert machine.starts_after(after, finished) == machine.full_pass(after)
    incremental = machine.decide(after, StepEnded(finished, "completed"))
    full = machine.decide(after, CoordinatorIdle())
    assert incremental == full


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_starts_without_the_lock_cannot_pass_a_cap_in_any_order(state, data):
    """When the machine says no lock is needed, starting ready steps in any
    order, one completion at a time, never passes max_running."""
    state = _settled(state)
    for _ in range(30):
        running = [s.runtime_id for s in state.steps if s.status == "running"]
        if not running:
            break
        finished = data.draw(st.sampled_from(running))
        state = state.with_status({finished: "completed"})
        decisions = machine.decide(state, StepEnded(finished, "completed"))
        start = next((d for d in decisions if isinstance(d, StartSteps)), None)
        if start is not None and not start.needs_run_lock:
            # Any subset started by racing workers stays within the cap.
            everything = state.with_status(dict.fromkeys(_dependency_ready(state), "running"))
            assert _running(everything) <= state.max_running
            for group, cap in {limit for s in state.steps for limit in s.limits}:
                assert len(_open_iterations(everything, group)) <= cap, group
        state = _apply(state, decisions)


@settings(max_examples=300, deadline=None)
@given(runs())
def test_when_no_cap_can_bind_starting_everything_ready_passes_none(state):
    """caps_cannot_bind's promise, on any state: every step whose
    dependencies completed may start at once, by racing workers, and still
    no loop runs more iterations than its cap, nor the run more steps than
    max_running."""
    if not machine.caps_cannot_bind(state):
        return
    everything = state.with_status(dict.fromkeys(_dependency_ready(state), "running"))
    assert _running(everything) <= max(state.max_running, _running(state))
    for group, cap in {limit for s in state.steps for limit in s.limits}:
        assert len(_open_iterations(everything, group)) <= max(cap, len(_open_iterations(state, group))), group


def _dependency_ready(state: RunState) -> list[str]:
    status = {s.runtime_id: s.status for s in state.steps}
    return [
        s.runtime_id
        for s in state.steps
        if s.status == "pending" and all(status[dep] == "completed" for dep in s.depends_on)
    ]


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_the_run_ends_only_when_every_step_is_terminal(state, data):
    """Driving a run by completions and failures until nothing moves: the
    finish wake comes exactly when every step is terminal."""
    state = _settled(state)
    for _ in range(40):
        running = [s.runtime_id for s in state.steps if s.status == "running"]
        if not running:
            break
        finished = data.draw(st.sampled_from(running))
        ended = data.draw(st.sampled_from(["completed", "completed", "failed", "cancelled"]))
        state = state.with_status({finished: ended})
        decisions = machine.decide(state, StepEnded(finished, ended))
        state = _apply(state, decisions)
        wakes = WakeCoordinator("finish") in decisions
        assert wakes == all(s.status in TERMINAL for s in state.steps)
    if all(s.status in TERMINAL for s in state.steps):
        end = machine.run_end(state)
        statuses = {s.status for s in state.steps}
        bad = statuses & {"failed", "cancelled"}
        assert end.status == ("completed" if not bad else "partial" if "completed" in statuses else "failed")
