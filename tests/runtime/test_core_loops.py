"""A repeat-until loop's end in the state machine (agents/core/loops.py
through machine.decide), without Django: examples, and properties over
random loops played to their end (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.core.decisions import AskJudge, EndLoop, NextIteration
from agents.core.happenings import IterationEnded
from agents.core.loops import iteration_outcome
from agents.core.state import UNREAD


def ended(n: int, max_iterations: int = 3, **fields) -> IterationEnded:
    return IterationEnded("refine", n, max_iterations, last_id=f"refine.{n}.review", **fields)


def decide(happened: IterationEnded):
    return machine.decide(UNREAD, happened)


def test_an_exhausted_loop_with_until_fails_with_zenflows_message():
    assert decide(ended(2, until="LGTM", output="not yet")) == (
        EndLoop("refine", "failed", "loop exhausted 3 iterations: until condition never became true"),
    )


def test_an_exhausted_loop_with_until_and_a_judge_names_both():
    (end,) = decide(
        ended(2, until="content == 'ok'", until_is_cel=True, variables={"content": "no"}, judge="j", verdict=False)
    )

    assert end == EndLoop(
        "refine",
        "failed",
        "loop exhausted 3 iterations: until condition never became true and judge agent never returned done",
    )


def test_a_loop_with_neither_completes_after_max_iterations():
    assert decide(ended(2)) == (EndLoop("refine", "completed", "maxIterations (3) reached"),)
    assert decide(ended(1)) == (NextIteration("refine", 2),)


def test_the_judge_is_asked_after_the_last_iteration():
    assert decide(ended(2, judge="critic")) == (AskJudge("refine", 2, "critic"),)
    assert decide(ended(2, judge="critic", verdict=True)) == (
        EndLoop("refine", "completed", "critic judged iteration 2 done"),
    )


def test_until_is_read_before_the_judge():
    assert decide(ended(0, until="LGTM", output="LGTM!", judge="critic")) == (
        EndLoop("refine", "completed", "refine.0.review said 'LGTM'"),
    )


def test_a_cel_until_reads_its_variables_and_one_that_fails_fails_the_loop():
    true = ended(0, until="iteration == 0", until_is_cel=True, variables={"iteration": 0})
    broken = ended(0, until="content + 1", until_is_cel=True, variables={"content": "x"})

    assert decide(true) == (EndLoop("refine", "completed", "until 'iteration == 0' held"),)
    ((end,),) = (decide(broken),)
    assert end.status == "failed" and end.reason.startswith("loop until eval (iteration 1): ")


def test_an_iteration_that_did_not_complete_fails_the_loop():
    assert decide(ended(0, completed=False, until="LGTM", output="LGTM")) == (
        EndLoop("refine", "failed", "iteration 0 did not complete"),
    )


loops = st.fixed_dictionaries(
    {
        "max_iterations": st.integers(1, 6),
        "until": st.sampled_from([None, "DONE"]),
        "judge": st.sampled_from([None, "critic"]),
        # The iteration whose output says DONE, and the one the judge approves (None: never).
        "said_at": st.none() | st.integers(0, 7),
        "judged_at": st.none() | st.integers(0, 7),
    }
)


def play(loop: dict) -> tuple[int, EndLoop, list[int]]:
    """Run a loop to its end: the iterations it ran, how it ended, and the
    iterations after which its judge was asked."""
    n, asked = 0, []
    verdict = None
    while True:
        output = "DONE" if loop["said_at"] == n else "more"
        happened = ended(n, loop["max_iterations"], until=loop["until"], output=output, judge=loop["judge"])
        (decision,) = decide(IterationEnded(**{**happened.__dict__, "verdict": verdict}))
        if isinstance(decision, AskJudge):
            asked.append(n)
            verdict = loop["judged_at"] == n
            continue
        verdict = None
        if isinstance(decision, EndLoop):
            return n + 1, decision, asked
        assert decision == NextIteration("refine", n + 1)
        n += 1


@settings(max_examples=300, deadline=None)
@given(loops)
def test_a_loop_ends_as_zenflows_within_its_iterations(loop):
    ran, end, asked = play(loop)

    assert 1 <= ran <= loop["max_iterations"]
    said = loop["until"] is not None and loop["said_at"] is not None and loop["said_at"] < ran
    judged = loop["judge"] is not None and loop["judged_at"] == ran - 1 and (ran - 1) in asked
    if said or judged:
        assert end.status == "completed"
    elif loop["until"] is None and loop["judge"] is None:
        assert (ran, end.status) == (loop["max_iterations"], "completed")
    else:
        assert ran == loop["max_iterations"]
        assert end.status == "failed" and end.reason.startswith(f"loop exhausted {ran} iterations: ")
    # The judge is asked after every iteration its loop's until did not end, the last one included.
    if loop["judge"] is not None:
        until_ended_last = loop["until"] is not None and loop["said_at"] == ran - 1
        assert asked == [n for n in range(ran) if not (until_ended_last and n == ran - 1)]
    else:
        assert asked == []


# -- an iteration's outcome from its steps' statuses --------------------------------


def test_an_iteration_with_a_step_skipped_for_its_condition_completed():
    assert iteration_outcome(["completed", "skipped"]) is True
    assert iteration_outcome(["completed", "failed", "skipped"]) is False
    assert iteration_outcome(["completed", "running"]) is None


@given(st.lists(st.sampled_from(["pending", "running", "completed", "failed", "skipped", "cancelled"]), max_size=8))
def test_an_iteration_is_decided_once_every_step_ended_and_done_only_without_failure(statuses):
    outcome = iteration_outcome(statuses)

    if any(s in ("pending", "running") for s in statuses):
        assert outcome is None
    else:
        assert outcome == all(s in ("completed", "skipped") for s in statuses)


# -- the delay between iterations ------------------------------------------------


@given(
    n=st.integers(0, 10),
    max_iterations=st.integers(1, 12),
    delay=st.floats(0, 3600),
    done=st.booleans(),
)
def test_only_a_next_iteration_waits_the_loop_s_delay(n, max_iterations, delay, done):
    (decision,) = decide(ended(n, max_iterations, until="LGTM", output="LGTM" if done else "more", delay=delay))

    if isinstance(decision, NextIteration):
        # Between iterations, never before the first (the first is iteration 0).
        assert decision == NextIteration("refine", n + 1, delay) and decision.iteration >= 1
    else:
        assert isinstance(decision, EndLoop)
        assert done or n + 1 >= max_iterations
