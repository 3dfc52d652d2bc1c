"""The rules of a step's turn: whether it may take place (maxTurns), and
what follows its answer. ``decide`` (agents/core/machine.py) calls them;
runs/actions/steps.py applies what they decide.

- ``TurnDue`` past maxTurns: the step fails.
- ``TurnAnswered``: a failed turn fails the step; a turn whose tool calls
  broke a cap (none left under maxToolCalls, the run past
  maxRunToolCalls, maxConsecutiveToolFailures turns in a row with no call
  that worked) fails it; a turn waiting for its calls' results waits; one
  that continues takes the next turn. A completed answer with mail
  arrived meanwhile takes another wake cycle to read it, within the
  step's wake-cycle cap and the hold timeout; past either the mail drops
  with that reason and the step completes, as it does with nothing unread.
"""

from __future__ import annotations

from agents.core.decisions import AwaitCalls, CompleteStep, DropMail, FailStep, NextTurn, TurnDecision, WakeAgain
from agents.core.happenings import ToolUse, TurnAnswered, TurnDue, WakeCount


def after_turn_event(happened: TurnDue | TurnAnswered) -> tuple[TurnDecision, ...]:
    """A turn about to be taken, or one recorded."""
    if isinstance(happened, TurnDue):
        return before_turn(happened)
    return after_answer(happened)


def before_turn(due: TurnDue) -> tuple[TurnDecision, ...]:
    """A turn past maxTurns is not taken: the step fails."""
    if due.turn > due.max_turns:
        return (FailStep(due.step_id, f"step {due.step_id} did not finish within maxTurns ({due.max_turns})"),)
    return ()


def after_answer(answered: TurnAnswered) -> tuple[TurnDecision, ...]:
    """What follows a recorded turn (see the module's docstring)."""
    if answered.status == "failed":
        return (FailStep(answered.step_id, answered.error),)
    breach = tool_cap_breach(answered.step_id, answered.tools) if answered.tools is not None else None
    if breach is not None:
        return (FailStep(answered.step_id, breach),)
    if answered.status == "waiting":
        return (AwaitCalls(unread=answered.unread > 0),)
    if answered.status == "continue":
        return (NextTurn(),)
    if not answered.unread or answered.wake is None:
        return (CompleteStep(),)
    return after_late_mail(answered.wake)


def after_late_mail(wake: WakeCount) -> tuple[TurnDecision, ...]:
    """A completed answer with mail that arrived meanwhile: another wake
    cycle, or past the cap or the hold timeout the mail drops and the step
    completes."""
    if wake.cycles >= wake.max_cycles:
        return (DropMail("max_wake_cycles"), CompleteStep())
    if wake.hold_timeout > 0 and wake.held_for > wake.hold_timeout:
        return (DropMail("hold_timeout"), CompleteStep())
    cycle = wake.cycles + 1
    return (WakeAgain(cycle, wake.max_cycles, warn=cycle == warning_cycle(wake.max_cycles)),)


def warning_cycle(cap: int) -> int:
    """The wake cycle at which max_wake_cycles_warning fires: 80% of the cap."""
    return max(1, (cap * 8) // 10)


def tool_cap_breach(step_id: str, tools: ToolUse) -> str | None:
    """Why the step must stop after this turn's tool calls, if it must.

    A turn asking for more calls than are left, with some left, ran none of
    them and got an error per call saying so (agents.runner): the model may
    ask for fewer. With none left there is nothing to ask for: the step
    fails, as one past the cap does. Turns, not calls, count toward
    maxConsecutiveToolFailures: five bad calls in one turn are one mistake
    the model can fix at once, and a turn fails when none of its calls worked."""
    if tools.cap_exhausted:
        return f"step {step_id} asked for more than {tools.max_calls} tool calls (maxToolCalls)"
    if tools.run_calls > tools.max_run_calls:
        return f"the run made more than {tools.max_run_calls} tool calls (maxRunToolCalls)"
    cap = tools.max_failed_turns
    if len(tools.recent_turns) >= cap and not any(tools.recent_turns[:cap]):
        return f"step {step_id}'s tool calls all failed in its last {cap} turns (maxConsecutiveToolFailures)"
    return None
