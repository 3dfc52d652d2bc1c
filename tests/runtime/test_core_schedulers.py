"""zenflow's schedulers (agents/core/ready.py ``scheduled``, through
machine.decide): the order ready steps start in when fewer may start than
are ready. Examples, and properties over random ready lists (hypothesis)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from agents.core import machine
from agents.core.machine import RunStarted, RunState, StartSteps, StepState
from agents.core.ready import scheduled

ready_lists = st.lists(st.tuples(st.integers(0, 9999), st.sampled_from("abcd")), unique_by=lambda s: s[0], max_size=12)


def agent(step: tuple[int, str]) -> str:
    return step[1]


def started(scheduler: str, steps: tuple[StepState, ...], max_running: int = 2) -> tuple[str, ...]:
    state = RunState("running", steps, max_running=max_running, scheduler=scheduler)
    (start, *_) = machine.decide(state, RunStarted())
    assert isinstance(start, StartSteps)
    return start.step_ids


def test_round_robin_starts_one_step_of_each_agent_in_turn():
    steps = tuple(StepState(f"s{i}", agent=a) for i, a in enumerate("aab"))

    assert started("dependency-first", steps) == ("s0", "s1")
    assert started("round-robin", steps) == ("s0", "s2")


def test_least_busy_starts_the_steps_of_the_least_busy_agent_first():
    steps = (
        StepState("busy", "running", agent="a"),
        StepState("s1", agent="a"),
        StepState("s2", agent="b"),
    )

    assert started("dependency-first", steps) == ("s1",)
    assert started("least-busy", steps) == ("s2",)


@given(
    ready_lists,
    st.sampled_from(["dependency-first", "round-robin", "least-busy"]),
    st.dictionaries(st.sampled_from("abcd"), st.integers(0, 5)),
)
def test_a_scheduler_only_orders_the_ready_steps(steps, scheduler, load):
    ordered = scheduled(list(steps), scheduler, agent, Counter(load))

    assert sorted(ordered) == sorted(steps)
    for name in "abcd":  # each agent's steps keep their order
        assert [s for s in ordered if s[1] == name] == [s for s in steps if s[1] == name]


@given(ready_lists)
def test_round_robin_takes_one_of_each_agent_per_round(steps):
    ordered = scheduled(list(steps), "round-robin", agent, Counter())

    counts = Counter(agent(s) for s in steps)
    for k in range(1, len(ordered) + 1):
        # In any prefix no agent is more than one step ahead of another that still had steps.
        taken = Counter(agent(s) for s in ordered[:k])
        most = max(taken.values())
        assert all(taken[a] >= min(most - 1, counts[a]) for a in counts)


@given(ready_lists, st.dictionaries(st.sampled_from("abcd"), st.integers(0, 5)))
def test_least_busy_puts_steps_of_less_busy_agents_first(steps, load):
    ordered = scheduled(list(steps), "least-busy", agent, Counter(load))

    loads = [load.get(agent(s), 0) for s in ordered]
    assert loads == sorted(loads)
