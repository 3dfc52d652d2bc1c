"""The coordinator's wake through ``decide`` (agents/core/wakes.py): plan
first, route mail within the wake-cycle cap, finish once every step is
done; without Django."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import CoordinatorRounds, DropMail, FinishRun, LastRound
from agents.core.happenings import CoordinatorAnswered, CoordinatorWoke
from agents.core.machine import RunState, StepState

STATUSES = ("pending", "running", "completed", "failed", "skipped", "cancelled")


@st.composite
def runs(draw) -> RunState:
    statuses = draw(st.lists(st.sampled_from(STATUSES), max_size=6))
    steps = tuple(StepState(f"s{n}", status, resuming=draw(st.booleans())) for n, status in enumerate(statuses))
    return RunState(draw(st.sampled_from(("running", "running", "completed", "cancelled"))), steps)


@given(runs(), st.booleans(), st.integers(0, 3), st.integers(0, 12), st.integers(1, 10), st.booleans())
def test_a_wake_plans_routes_finishes_or_goes_idle(state, plans_first, unread, cycles, cap, finalized):
    decisions = machine.decide(state, CoordinatorWoke(plans_first, unread, cycles, cap, finalized))

    done = all(s.status not in ("pending", "running") and not s.resuming for s in state.steps)
    rounds = [d for d in decisions if isinstance(d, CoordinatorRounds)]
    for wake in rounds:
        assert (wake.cycle, wake.max_cycles) == (cycles + 1, cap)
        assert wake.warn == (wake.cycle == max(1, cap * 8 // 10))
    if state.status != "running":
        assert decisions == ()
    elif plans_first:
        assert [r.reason for r in rounds] == ["plan"] and len(decisions) == 1
    elif unread:
        expected = (DropMail("max_wake_cycles"),) if cycles >= cap else tuple(rounds)
        assert decisions == expected
        assert all(r.reason == "messages" for r in rounds)
    elif done:
        assert decisions[-1] == FinishRun()
        assert [r.reason for r in rounds] == ([] if finalized else ["finish"])
    else:
        assert decisions == ()


@given(st.integers(1, 10), st.integers(1, 30))
def test_mail_that_keeps_coming_is_routed_at_most_cap_times(cap, wakes):
    cycles, routed = 0, 0
    for _ in range(wakes):
        decisions = machine.decide(RunState("running"), CoordinatorWoke(False, 1, cycles, cap))
        for decision in decisions:
            if isinstance(decision, CoordinatorRounds):
                routed += 1
                cycles = decision.cycle
    assert routed == min(cap, wakes)


@given(
    st.sampled_from(["plan", "messages", "finish"]),
    st.sampled_from(["continue", "completed", "waiting", "failed"]),
    st.booleans(),
    st.booleans(),
)
def test_a_round_that_answers_or_finalizes_is_the_last_and_a_finishs_last_ends_the_run(
    reason, status, finalized, owes_workers
):
    decisions = machine.decide(RunState("running"), CoordinatorAnswered(reason, status, finalized, owes_workers))

    last = status != "failed" and (status == "completed" or finalized)
    assert (LastRound() in decisions) == last
    assert (FinishRun() in decisions) == (last and reason == "finish" and not owes_workers)
