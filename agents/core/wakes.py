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
finish after the rounds fails the run for it).
"""

from __future__ import annotations

from typing import Literal

from agents.core.decisions import CoordinatorRounds, Decision, DropMail, FinishRun, LastRound
from agents.core.happenings import CoordinatorAnswered, CoordinatorWoke
from agents.core.state import RunState, all_done
from agents.core.turns import warning_cycle


def after_coordinator(state: RunState, happened: CoordinatorWoke | CoordinatorAnswered) -> tuple[Decision, ...]:
    """A coordinator wake's rule, or a round's."""
    if isinstance(happened, CoordinatorWoke):
        return after_wake(state, happened)
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
    if answered.reason == "finish" and not answered.owes_workers:
        return (LastRound(), FinishRun())
    return (LastRound(),)


def _rounds(reason: Literal["plan", "messages", "finish"], woke: CoordinatorWoke) -> CoordinatorRounds:
    cycle = woke.cycles + 1
    return CoordinatorRounds(reason, cycle, woke.max_cycles, warn=cycle == warning_cycle(woke.max_cycles))
