"""Two runs side by side (the compare page): their inputs, tokens, cost,
duration and claims, and each step's output in both with a line diff, its
tool calls, tokens and duration. Text is only read here; the template
escapes it."""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from runs.actions.budgets import totals_of
from runs.actions.costs import cost_of
from runs.models import Run, Step, ToolCall

# The most characters of a step's output that are diffed (and shown).
MAX_DIFF_CHARS = 20_000


@dataclass(frozen=True)
class RunSide:
    """One run as the page compares it."""

    run: Run
    tokens: int
    cost: str  # the cost at the operator's prices, or "no price"
    seconds: float | None
    claims: list[str]


@dataclass(frozen=True)
class StepSide:
    step: Step
    tools: list[str]  # "name ×count", by name
    seconds: float | None


@dataclass
class StepPair:
    """A step id in either run, with its row in each (None: not in that run)."""

    step_id: str
    a: StepSide | None = None
    b: StepSide | None = None
    diff: list[tuple[str, str]] = field(default_factory=list)  # (kind: same, added, removed, hunk; line)
    truncated: bool = False

    @property
    def changed(self) -> bool:
        return any(kind in ("added", "removed") for kind, _ in self.diff)


@dataclass(frozen=True)
class Comparison:
    a: RunSide
    b: RunSide
    steps: list[StepPair]


def compare(a: Run, b: Run) -> Comparison:
    steps_a, steps_b = _steps(a), _steps(b)
    pairs: dict[str, StepPair] = {}
    for side, steps, tools in (("a", steps_a, _tools(a)), ("b", steps_b, _tools(b))):
        for step in steps:
            pair = pairs.setdefault(step.step_id, StepPair(step.step_id))
            setattr(pair, side, StepSide(step, tools.get(step.pk, []), _seconds(step.started, step.finished)))
    for pair in pairs.values():
        _diff(pair)
    return Comparison(_run_side(a, steps_a), _run_side(b, steps_b), list(pairs.values()))


def _steps(run: Run) -> list[Step]:
    return list(run.steps.exclude(kind=Step.Kind.COORDINATOR).order_by("position", "pk"))


def _tools(run: Run) -> dict[int, list[str]]:
    counts: dict[int, Counter[str]] = {}
    for step_pk, name in ToolCall.objects.filter(run=run).values_list("step_id", "name"):
        counts.setdefault(step_pk, Counter())[name] += 1
    return {pk: [f"{name} ×{n}" for name, n in sorted(names.items())] for pk, names in counts.items()}


def _run_side(run: Run, steps: list[Step]) -> RunSide:
    every = list(run.steps.all())
    everything = totals_of(every).all
    tokens = everything.prompt + everything.completion
    total = cost_of(run, every).total
    claims = list(run.claims.order_by("pk").values_list("claim", flat=True)[:50])
    return RunSide(
        run, tokens, "no price" if total is None else f"{total:.6f}", _seconds(run.started, run.finished), claims
    )


def _diff(pair: StepPair) -> None:
    before = pair.a.step.output if pair.a else ""
    after = pair.b.step.output if pair.b else ""
    pair.truncated = max(len(before), len(after)) > MAX_DIFF_CHARS
    lines = difflib.unified_diff(
        before[:MAX_DIFF_CHARS].splitlines(), after[:MAX_DIFF_CHARS].splitlines(), lineterm="", n=3
    )
    kinds = {"+": "added", "-": "removed", "@": "hunk", " ": "same"}
    pair.diff = [(kinds.get(line[:1], "same"), line) for line in lines if not line.startswith(("---", "+++"))]


def _seconds(started: datetime | None, finished: datetime | None) -> float | None:
    return None if started is None or finished is None else (finished - started).total_seconds()
