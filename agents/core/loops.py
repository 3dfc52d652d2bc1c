"""A repeat-until loop's end, decided after each iteration as zenflow's
executor does (``decide`` with ``IterationEnded``):

- an iteration with a step that did not complete (``iteration_outcome``:
  one skipped for its condition counts as done) fails the loop;
- ``until`` first: a CEL ``until`` true ends the loop ``completed`` (one that
  fails to evaluate fails it), as does zenweb's text ``until`` found in the
  last inner step's output;
- then the ``untilAgent`` judge, asked after every iteration, the last one
  included: done ends the loop ``completed``;
- after ``maxIterations``, a loop with ``until`` or ``untilAgent`` that
  neither ended fails (``loop exhausted N iterations: ...``); one with
  neither completes;
- otherwise the next iteration, after the loop's ``delay`` (zenflow's:
  between iterations, never before the first).
"""

from __future__ import annotations

from collections.abc import Iterable

from agents import cel
from agents.core.decisions import AskJudge, EndLoop, IterationDecision, NextIteration
from agents.core.happenings import IterationEnded
from agents.core.ready import DONE, TERMINAL


def iteration_outcome(statuses: Iterable[str]) -> bool | None:
    """Whether an iteration whose steps have ``statuses`` completed (each
    step completed, or was skipped for its condition, as in zenflow: a
    failure policy's skip comes with a step that failed), did not (False),
    or is still under way (None)."""
    seen = list(statuses)
    if not all(status in TERMINAL for status in seen):
        return None
    return all(status in DONE for status in seen)


def after_iteration(ended: IterationEnded) -> tuple[IterationDecision, ...]:
    """What follows iteration ``ended.iteration`` of its loop."""
    loop, n = ended.loop_id, ended.iteration
    if not ended.completed:
        return (EndLoop(loop, "failed", f"iteration {n} did not complete"),)
    if ended.until is not None:
        try:
            met = _until_met(ended)
        except cel.CelError as exc:
            return (EndLoop(loop, "failed", f"loop until eval (iteration {n + 1}): {exc}"),)
        if met:
            said = f"until {ended.until!r} held" if ended.until_is_cel else f"{ended.last_id} said {ended.until!r}"
            return (EndLoop(loop, "completed", said),)
    if ended.judge is not None:
        if ended.verdict is None:
            return (AskJudge(loop, n, ended.judge),)
        if ended.verdict:
            return (EndLoop(loop, "completed", f"{ended.judge} judged iteration {n} done"),)
    if n + 1 < ended.max_iterations:
        return (NextIteration(loop, n + 1, ended.delay),)
    return (_exhausted(ended),)


def _until_met(ended: IterationEnded) -> bool:
    assert ended.until is not None
    if ended.until_is_cel:
        return cel.evaluate_bool(ended.until, ended.variables)
    return ended.until in ended.output


def _exhausted(ended: IterationEnded) -> EndLoop:
    """The end after ``maxIterations``: failed, as zenflow's, when an
    ``until`` or a judge could have ended the loop and did not."""
    never = []
    if ended.until is not None:
        never.append("until condition never became true")
    if ended.judge is not None:
        never.append("judge agent never returned done")
    if not never:
        return EndLoop(ended.loop_id, "completed", f"maxIterations ({ended.max_iterations}) reached")
    reason = f"loop exhausted {ended.max_iterations} iterations: {' and '.join(never)}"
    return EndLoop(ended.loop_id, "failed", reason)
