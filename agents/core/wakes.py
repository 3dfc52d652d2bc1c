"""The rule of the coordinator's wake: what it does with the run as the
wake found it. ``decide`` (agents/core/machine.py) calls it;
runs/actions/coordinator.py applies it.

- A coordinator that can spawn workers and has not planned plans first.
- Mail waiting: it routes it, within its wake-cycle cap; past the cap its
  mailbox closes (what waits and every later message drops as
  max-wake-cycles) and the wake goes idle.
- Every step done (terminal, none resumed) and no mail: it finishes the
  run, gives the run's result first unless it has already; the run ends.
- Otherwise the wake goes idle (nothing decided).

After each of its rounds (``CoordinatorAnswered``): a round that did not
fail and answered, or called finalize, is the wake's last; the last round
of a finish ends the run, unless the coordinator owes workers (then the
finish after the rounds fails the run for it) or the wake spawned workers:
those run (fix-ups, follow-ups), and their end wakes it to finish again,
with their results.

A worker asked for (``WorkerAsked``) is refused at once, the reason its
call's result, when it could not run or its result could not be read: the
run is not running; it depends on a step that ended without completing (it
would never start); or the coordinator has taken its wake cycles
(maxWakeCycles) in a wake other than its plan, so that no wake is left to
read what the worker finds. A coordinator that keeps spawning fix-ups thus
ends as its cap says: at the cap it must finalize.
"""

from __future__ import annotations

from typing import Literal

from agents.core.decisions import CoordinatorRounds, Decision, DropMail, FinishRun, LastRound, RefuseCall
from agents.core.happenings import CoordinatorAnswered, CoordinatorWoke, WorkerAsked
from agents.core.state import RunState, all_done
from agents.core.turns import warning_cycle


def after_coordinator(
    state: RunState, happened: CoordinatorWoke | CoordinatorAnswered | WorkerAsked
) -> tuple[Decision, ...]:
    """A coordinator wake's rule, a round's, or a spawn's."""
    if isinstance(happened, CoordinatorWoke):
        return after_wake(state, happened)
    if isinstance(happened, WorkerAsked):
        return after_spawn(state, happened)
    return after_round(happened)


def after_wake(state: RunState, woke: CoordinatorWoke) -> tuple[Decision, ...]:
    """What the coordinator's wake does (see the module's docstring); in a
    run that is not running, nothing."""
    if state.status != "running":
        return ()
    if woke.plans_first:
        return (_rounds("plan", woke),)
    if woke.unread:
        if woke.cycles >= woke.max_cycles:
            return (DropMail("max_wake_cycles"),)
        return (_rounds("messages", woke),)
    if all_done(state):
        return (FinishRun(),) if woke.finalized else (_rounds("finish", woke), FinishRun())
    return ()


def after_round(answered: CoordinatorAnswered) -> tuple[Decision, ...]:
    """What follows one round of the coordinator's wake (see the module's docstring)."""
    if answered.status == "failed" or not (answered.status == "completed" or answered.finalized):
        return ()
    if answered.reason == "finish" and not answered.owes_workers and not answered.spawned:
        return (LastRound(), FinishRun())
    return (LastRound(),)


def after_spawn(state: RunState, asked: WorkerAsked) -> tuple[RefuseCall, ...]:
    """Whether a worker asked for is refused, and why (see the module's
    docstring); nothing decided: it is added, and runs."""
    if state.status != "running":
        return (RefuseCall(f"the run is {state.status or 'not running'}: no worker can start in it"),)
    ended = [
        s for s in state.steps if s.runtime_id in asked.depends_on and s.status in ("failed", "cancelled", "skipped")
    ]
    if ended:
        why = ", ".join(f"{s.runtime_id} ended {s.status}" for s in ended)
        return (
            RefuseCall(f"this worker would never start: it depends on {why}; depend only on steps that can complete"),
        )
    if asked.reason != "plan" and asked.cycle >= asked.max_cycles:
        taken = f"the coordinator has taken {asked.cycle} of its {asked.max_cycles} wake cycles (maxWakeCycles)"
        return (
            RefuseCall(
                f"no worker can be added: {taken} and no wake is left to read a new worker's result; "
                "finalize with what the workers found"
            ),
        )
    return ()


def _rounds(reason: Literal["plan", "messages", "finish"], woke: CoordinatorWoke) -> CoordinatorRounds:
    cycle = woke.cycles + 1
    return CoordinatorRounds(reason, cycle, woke.max_cycles, warn=cycle == warning_cycle(woke.max_cycles))
