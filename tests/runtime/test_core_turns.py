"""A step turn's rules through ``decide`` (agents/core/turns.py): maxTurns,
the tool caps, wake cycles and the hold timeout; without Django."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import AwaitCalls, CompleteStep, DropMail, FailStep, NextTurn, WakeAgain
from agents.core.happenings import ToolUse, TurnAnswered, TurnDue, WakeCount


def decide(happened):
    return machine.decide(machine.UNREAD, happened)


def tools(**changes) -> ToolUse:
    fields = {
        "cap_exhausted": False,
        "max_calls": 10,
        "run_calls": 3,
        "max_run_calls": 100,
        "recent_turns": (1, 0),
        "max_failed_turns": 3,
    }
    return ToolUse(**(fields | changes))


@given(st.integers(1, 60), st.integers(1, 50))
def test_a_turn_past_max_turns_fails_the_step_and_no_other_does(turn, max_turns):
    decisions = decide(TurnDue("fetch", turn, max_turns))

    if turn > max_turns:
        assert decisions == (FailStep("fetch", f"step fetch did not finish within maxTurns ({max_turns})"),)
    else:
        assert decisions == ()


def test_a_turns_status_says_what_follows_when_no_cap_binds():
    assert decide(TurnAnswered("s", "failed", "boom")) == (FailStep("s", "boom"),)
    assert decide(TurnAnswered("s", "continue", tools=tools())) == (NextTurn(),)
    assert decide(TurnAnswered("s", "waiting", tools=tools())) == (AwaitCalls(unread=False),)
    assert decide(TurnAnswered("s", "waiting", unread=1, tools=tools())) == (AwaitCalls(unread=True),)
    assert decide(TurnAnswered("s", "completed")) == (CompleteStep(),)


def test_each_tool_cap_fails_the_step_with_its_name():
    def failed(use: ToolUse) -> str:
        (decision,) = decide(TurnAnswered("s", "continue", tools=use))
        assert isinstance(decision, FailStep)
        return decision.error

    assert "maxToolCalls" in failed(tools(cap_exhausted=True))
    assert "maxRunToolCalls" in failed(tools(run_calls=101))
    assert "maxConsecutiveToolFailures" in failed(tools(recent_turns=(0, 0, 0)))
    # Fewer failed turns than the cap, or one that worked among them: the step goes on.
    assert decide(TurnAnswered("s", "continue", tools=tools(recent_turns=(0, 0)))) == (NextTurn(),)
    assert decide(TurnAnswered("s", "continue", tools=tools(recent_turns=(0, 2, 0)))) == (NextTurn(),)
    # A failed turn fails with its own error first.
    assert decide(TurnAnswered("s", "failed", "boom", tools=tools(cap_exhausted=True))) == (FailStep("s", "boom"),)


@given(st.integers(1, 12), st.floats(0, 100), st.floats(0, 50))
def test_late_mail_takes_wake_cycles_up_to_the_cap_warned_once_at_80_percent(cap, held_for, hold_timeout):
    """Mail that keeps arriving as the step answers: wake cycles 1..cap,
    each but the held-too-long one, then the mail drops and the step completes."""
    cycles, warned = 0, []
    for _ in range(cap + 2):
        wake = WakeCount(cycles, cap, held_for if cycles else 0.0, hold_timeout)
        decisions = decide(TurnAnswered("s", "completed", unread=2, wake=wake))
        if decisions[-1] == CompleteStep():
            (drop, _) = decisions
            assert isinstance(drop, DropMail)
            held_too_long = bool(cycles) and hold_timeout > 0 and held_for > hold_timeout
            assert drop.reason == ("max_wake_cycles" if cycles >= cap else "hold_timeout")
            assert cycles >= cap or held_too_long
            break
        (again,) = decisions
        assert again == WakeAgain(cycles + 1, cap, warn=again.warn)
        cycles = again.cycle
        if again.warn:
            warned.append(cycles)
    else:
        raise AssertionError("the wake cycles never ended")
    assert cycles <= cap
    if cycles == cap:
        assert warned == [max(1, cap * 8 // 10)]
