"""``decide`` (agents/core/machine.py) as the one entry of every rule: a
run's end (its status, whoever asks for it), the failure policy followed by
what starts, approvals and deadlines; without Django."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import gates, machine
from agents.core.decisions import coordinator_end
from agents.core.happenings import ApprovalDecided, DeadlinePassed
from agents.core.machine import (
    CoordinatorFinished,
    CoordinatorIdle,
    CoordinatorState,
    EndRun,
    RunCancelled,
    RunFailed,
    RunState,
    StepEnded,
    StepState,
    StopSteps,
)
from tests.runtime.test_core_machine import runs

RUN_STATUSES = ("pending", "awaiting_approval", "running", "completed", "partial", "failed", "cancelled", "blocked")
ENDED = {"completed", "partial", "failed", "cancelled", "blocked"}
STEP_STATUSES = ("pending", "running", "completed", "failed", "skipped", "cancelled")


@given(st.sampled_from(RUN_STATUSES), st.text(max_size=20))
def test_a_failure_or_a_cancel_ends_a_run_that_has_not_ended_and_nothing_else(status, why):
    state = RunState(status)
    failed = machine.decide(state, RunFailed(why))
    cancelled = machine.decide(state, RunCancelled(why))

    if status in ENDED:
        assert failed == cancelled == ()
    else:
        assert failed == (EndRun("failed", why),)
        assert cancelled == (EndRun("cancelled", why),)


@given(st.lists(st.sampled_from(("completed", "failed", "skipped", "cancelled")), max_size=8))
def test_a_coordinators_finish_ends_the_run_with_the_status_rule(statuses):
    steps = tuple(StepState(f"s{n}", status, error="boom") for n, status in enumerate(statuses))
    state = RunState("running", steps)

    (end,) = machine.decide(state, CoordinatorFinished())

    bad = set(statuses) & {"failed", "cancelled"}
    assert end.status == ("completed" if not bad else "partial" if "completed" in statuses else "failed")
    assert end == machine.run_end(state)
    assert machine.decide(RunState("cancelled", steps), CoordinatorFinished()) == ()


def test_an_ended_runs_steps_and_coordinator_follow_its_status():
    assert EndRun("cancelled").drop == EndRun("blocked").drop == "workflow_cancelled"
    assert EndRun("failed", "boom").drop == "target_terminal"
    assert [coordinator_end(s) for s in ("completed", "partial", "failed", "cancelled", "blocked")] == [
        "completed",
        "completed",
        "failed",
        "cancelled",
        "cancelled",
    ]
    assert EndRun("partial").coordinator_status == "completed"


@settings(max_examples=200, deadline=None)
@given(runs(), st.data())
def test_a_failure_stops_by_the_policy_then_decides_as_a_full_pass_on_what_it_left(state, data):
    candidates = [s.runtime_id for s in state.steps if s.status in ("failed", "cancelled")]
    if not candidates:
        return
    stopped = data.draw(st.sampled_from(candidates))
    status = state.step(stopped).status
    coordinator = data.draw(st.builds(CoordinatorState, st.booleans(), st.booleans(), st.booleans()))
    state = RunState(state.status, state.steps, coordinator, state.max_running, state.on_step_failure)

    decisions = machine.decide(state, StepEnded(stopped, status))

    stop = machine.stop_after_failure(state, stopped)
    rest = decisions
    if stop.step_ids:
        assert decisions[0] == stop
        rest = decisions[1:]
        state = state.with_status(dict.fromkeys(stop.step_ids, stop.status))
    assert not any(isinstance(d, StopSteps) for d in rest)
    assert rest == machine.decide(state, CoordinatorIdle())


@given(
    kind=st.sampled_from(["workflow", "tool"]),
    decision=st.sampled_from(["approve", "reject", "lapse"]),
    approvals=st.integers(0, 3),
    required=st.integers(1, 2),
    deadline=st.sampled_from(["run", "step"]),
    status=st.sampled_from(RUN_STATUSES),
)
def test_approvals_and_deadlines_are_decided_by_their_rules_whatever_the_state(
    kind, decision, approvals, required, deadline, status
):
    decided = ApprovalDecided(kind, decision, "why", approvals, required)
    passed = DeadlinePassed(deadline, "late", "s1")
    for state in (machine.UNREAD, RunState(status)):
        assert machine.decide(state, decided) == gates.after_approval(decided)
        assert machine.decide(state, passed) == gates.after_deadline(passed)


@settings(max_examples=200, deadline=None)
@given(runs(), st.data())
def test_where_the_prefilter_finds_no_step_that_may_start_the_flags_decide_as_the_rows_do(state, data):
    """schedule's prefilter (runs/store/sql/schedule.py): no pending step
    has its dependencies done. decide on the run's flags alone (no step
    rows, whether some step is unfinished) then decides what it decides on
    every row."""
    status = {s.runtime_id: s.status for s in state.steps}
    if any(
        s.status == "pending" and all(status[d] in ("completed", "skipped") for d in s.depends_on) for s in state.steps
    ):
        return
    coordinator = data.draw(st.builds(CoordinatorState, st.booleans(), st.booleans(), st.booleans()))
    full = RunState("running", state.steps, coordinator, state.max_running)
    unfinished = not machine.all_done(full)
    flags = RunState("running", (), coordinator, others_unfinished=unfinished)
    happened = data.draw(st.sampled_from([CoordinatorIdle(), StepEnded("s0", "completed")]))

    assert machine.decide(flags, happened) == machine.decide(full, happened)


@given(st.lists(st.sampled_from(("completed", "failed", "skipped", "cancelled")), max_size=6))
def test_a_coordinator_that_owed_workers_fails_the_run_whatever_its_steps_did(statuses):
    steps = tuple(StepState(f"s{n}", status) for n, status in enumerate(statuses))

    (end,) = machine.decide(RunState("running", steps), CoordinatorFinished(owes_workers=True))

    assert (end.status, end.error) == ("failed", machine.NO_WORKERS)
