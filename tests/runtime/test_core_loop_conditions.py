"""A loop's own ``condition`` in the state machine (agents/core/conditions.py
through machine.decide), without Django: read once, when the loop's first
step would start; false skips every step of the loop, a failure fails them
all. Examples, and a property over random loops played to their end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import FailStep, SkipStep
from agents.core.machine import RunStarted, RunState, StartSteps, StepEnded, StepState, StopSteps


def looped(iterations: int, inner: int, condition: str, *, repeat: bool = False, **statuses: str) -> RunState:
    """``check``, then loop ``L`` (forEach ``L[i].x``, or repeat-until ``L.0.x``
    with its own row) of ``inner`` chained steps, then ``after`` on the loop."""
    steps = [StepState("check", statuses.get("check", "pending"))]
    finals = []
    if repeat:
        steps.append(StepState("L", kind="loop"))
    for i in range(1 if repeat else iterations):
        prefix = f"L.{i}" if repeat else f"L[{i}]"
        for j in range(inner):
            deps = (f"{prefix}.x{j - 1}",) if j else ("check",)
            steps.append(StepState(f"{prefix}.x{j}", depends_on=deps))
        finals.append(f"{prefix}.x{inner - 1}")
    steps.append(StepState("after", depends_on=("L",) if repeat else tuple(finals)))
    return RunState("running", tuple(steps), conditions={"L": condition}, outputs={"check": "healthy"})


def test_a_false_loop_condition_skips_every_step_of_the_loop_and_the_next_step_starts():
    state = looped(2, 2, "steps.check.content == 'down'", check="completed")

    decisions = machine.decide(state, StepEnded("check", "completed"))

    others = ("L[0].x1", "L[1].x0", "L[1].x1")
    assert decisions == (
        SkipStep("L[0].x0", "loop L's condition false: steps.check.content == 'down'", others=others),
        StartSteps(("after",), needs_run_lock=False),
    )


def test_a_false_condition_of_a_repeat_until_loop_skips_its_own_row_too():
    state = looped(1, 1, "false", repeat=True, check="completed")

    skip, start = machine.decide(state, StepEnded("check", "completed"))

    assert isinstance(skip, SkipStep) and (skip.step_id, skip.others) == ("L.0.x0", ("L",))
    assert start == StartSteps(("after",), needs_run_lock=False)


def test_a_true_loop_condition_starts_the_loop_and_is_not_read_again():
    state = looped(2, 1, "steps.check.content == 'healthy'", check="completed")
    assert machine.decide(state, StepEnded("check", "completed")) == (
        StartSteps(("L[0].x0", "L[1].x0"), needs_run_lock=False),
    )

    # Once a step of the loop started, what the condition reads no longer matters.
    later = RunState("running", state.steps, conditions={"L": "false"}).with_status(
        {"check": "completed", "L[0].x0": "completed"}
    )
    assert machine.decide(later, StepEnded("L[0].x0", "completed")) == (StartSteps(("L[1].x0",), needs_run_lock=False),)


def test_a_loop_condition_that_fails_to_evaluate_fails_the_loop_and_the_policy_follows():
    state = looped(2, 1, "steps.size() + 'x'", check="completed")

    fail, stop, *_ = machine.decide(state, StepEnded("check", "completed"))

    assert isinstance(fail, FailStep) and (fail.step_id, fail.others) == ("L[0].x0", ("L[1].x0",))
    assert fail.error.startswith("loop L's condition: ")
    assert stop == StopSteps(("after",), "cancelled", "target_terminal")


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.booleans(), st.booleans(), st.integers(1, 4))
def test_a_loop_runs_whole_or_not_at_all_as_its_condition_says(iterations, inner, holds, repeat, max_running):
    state = looped(iterations, inner, "true" if holds else "false", repeat=repeat)
    state = RunState("running", state.steps, max_running=max_running, conditions=state.conditions)
    members = {s.runtime_id for s in state.steps if s.runtime_id.startswith(("L.", "L["))}

    started, skipped = _play(state)

    assert "after" in started
    if holds:
        assert members <= set(started) and not skipped
    else:
        assert not members & set(started) and skipped == members | ({"L"} if repeat else set())


def _play(state: RunState) -> tuple[list[str], set[str]]:
    """Apply decide's decisions until the run rests (started steps complete
    one at a time, a repeat loop's row when its steps did)."""
    started: list[str] = []
    skipped: set[str] = set()
    running: list[str] = []
    decisions = machine.decide(state, RunStarted())
    for _ in range(200):
        for decision in decisions:
            if isinstance(decision, SkipStep):
                skipped |= {decision.step_id, *decision.others}
                state = state.with_status(dict.fromkeys((decision.step_id, *decision.others), "skipped"))
            elif isinstance(decision, StartSteps):
                started.extend(decision.step_ids)
                running.extend(decision.step_ids)
                state = state.with_status(dict.fromkeys(decision.step_ids, "running"))
        if not running:
            return started, skipped
        done = running.pop(0)
        state = state.with_status({done: "completed"})
        if state.steps[1].kind == "loop" and all(s.terminal for s in state.steps if s.runtime_id.startswith("L.")):
            state = state.with_status({"L": "completed"})
        decisions = machine.decide(state, StepEnded(done, "completed"))
    raise AssertionError("the run never rested")
