"""A step's ``condition`` in the state machine (agents/core/conditions.py
through machine.decide), without Django: examples, and properties over
random runs (hypothesis) played to their end."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import FailStep, SkipStep
from agents.core.machine import RunStarted, RunState, StartSteps, StepEnded, StepState, StopSteps, WakeCoordinator


def chain(n: int, conditions: dict[str, str], outputs: dict[str, str] | None = None, **statuses: str) -> RunState:
    steps = tuple(
        StepState(f"s{i}", statuses.get(f"s{i}", "pending"), (f"s{i - 1}",) if i > 1 else ()) for i in range(1, n + 1)
    )
    pending = {k: v for k, v in conditions.items() if statuses.get(k, "pending") == "pending"}
    return RunState("running", steps, conditions=pending, outputs=outputs or {})


def test_a_false_condition_skips_the_step_and_its_successor_starts():
    state = chain(3, {"s2": "steps.s1.content.contains('fix')"}, {"s1": "all good"}, s1="completed")

    decisions = machine.decide(state, StepEnded("s1", "completed"))

    assert decisions == (
        SkipStep("s2", "condition false: steps.s1.content.contains('fix')"),
        StartSteps(("s3",), needs_run_lock=False),
    )


def test_a_true_condition_starts_the_step():
    state = chain(3, {"s2": "steps.s1.content.contains('fix')"}, {"s1": "please fix"}, s1="completed")

    assert machine.decide(state, StepEnded("s1", "completed")) == (StartSteps(("s2",), needs_run_lock=False),)


def test_a_condition_reading_a_step_that_never_finished_skips():
    state = chain(2, {"s1": "steps.ghost.status == 'completed'"})

    (skip, *_) = machine.decide(state, RunStarted())

    assert isinstance(skip, SkipStep) and skip.reason.startswith("condition read what no finished step gave")


def test_a_condition_that_fails_otherwise_fails_its_step_and_the_policy_follows():
    state = chain(3, {"s1": "steps.size() + 'x'"})

    decisions = machine.decide(state, RunStarted())

    assert isinstance(decisions[0], FailStep) and decisions[0].step_id == "s1"
    assert decisions[1] == StopSteps(("s2", "s3"), "cancelled", "target_terminal")
    assert decisions[2:] == (WakeCoordinator("finish"),)


def test_a_condition_reads_its_own_iteration_s_steps_by_their_bare_ids():
    steps = (StepState("loop[0].a", "completed"), StepState("loop[0].b", depends_on=("loop[0].a",)))
    state = RunState("running", steps, conditions={"loop[0].b": "steps.a.content == 'go'"}, outputs={"loop[0].a": "go"})

    assert machine.decide(state, StepEnded("loop[0].a", "completed")) == (
        StartSteps(("loop[0].b",), needs_run_lock=False),
    )


def test_a_run_without_conditions_decides_as_before():
    plain = chain(3, {}, s1="completed")

    assert machine.decide(plain, StepEnded("s1", "completed")) == (StartSteps(("s2",), needs_run_lock=False),)


# -- properties: random DAGs with random conditions, played to the end --------------


@st.composite
def runs(draw):
    n = draw(st.integers(1, 8))
    steps = []
    for i in range(n):
        deps = draw(st.sets(st.integers(0, i - 1), max_size=2)) if i else set()
        steps.append(StepState(f"s{i}", depends_on=tuple(f"s{d}" for d in sorted(deps))))
    truth = draw(st.lists(st.sampled_from(["true", "false", None]), min_size=n, max_size=n))
    conditions = {f"s{i}": c for i, c in enumerate(truth) if c is not None}
    return RunState("running", tuple(steps), max_running=draw(st.integers(1, 4)), conditions=conditions)


def play(state: RunState) -> tuple[RunState, list[str], list[str]]:
    """Apply decide's decisions until the run rests: started steps complete
    one at a time. What it ends with, what started, what was skipped."""
    started: list[str] = []
    skipped: list[str] = []
    decisions = machine.decide(state, RunStarted())
    running: list[str] = []
    for _ in range(100):
        for decision in decisions:
            if isinstance(decision, SkipStep):
                skipped.append(decision.step_id)
                state = state.with_status({decision.step_id: "skipped"})
            elif isinstance(decision, StartSteps):
                started.extend(decision.step_ids)
                running.extend(decision.step_ids)
                state = state.with_status(dict.fromkeys(decision.step_ids, "running"))
        pending = {k: v for k, v in state.conditions.items() if state.step(k).status == "pending"}
        state = replace(state, conditions=pending)
        if not running:
            return state, started, skipped
        done = running.pop(0)
        state = state.with_status({done: "completed"})
        decisions = machine.decide(state, StepEnded(done, "completed"))
    raise AssertionError("the run never rested")


@settings(max_examples=150, deadline=None)
@given(runs())
def test_every_step_ends_and_only_those_whose_condition_is_false_are_skipped(state):
    false = {k for k, v in state.conditions.items() if v == "false"}

    ended, started, skipped = play(state)

    assert all(step.terminal for step in ended.steps)
    assert set(skipped) == false
    assert not false & set(started)
    assert len(started) == len(set(started))


@settings(max_examples=150, deadline=None)
@given(runs())
def test_no_step_starts_before_its_dependencies_completed_or_were_skipped(state):
    order: dict[str, int] = {}
    ended, started, skipped = play(state)
    for n, step_id in enumerate([*skipped, *started]):
        order.setdefault(step_id, n)
    for step in ended.steps:
        if step.runtime_id in started:
            assert all(ended.step(dep).status in ("completed", "skipped") for dep in step.depends_on)
