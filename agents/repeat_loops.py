"""Repeat-until loops at run time: what follows an iteration (done, ask a
judge, or the next iteration's steps), rebuilt the way agents/expansion.py
built the loop."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agents import bounded_json, ids
from agents.core import machine
from agents.core.decisions import AskJudge, EndLoop, NextIteration
from agents.core.happenings import IterationEnded
from agents.core.state import UNREAD
from agents.expansion import (
    MAX_RUN_STEPS,
    ExpansionError,
    RuntimeStep,
    Scope,
    clip,
    each_scope,
    expand_list,
    include_scope,
    items_of,
    repeat_scope,
    root_scope,
)
from agents.spec import LoopSpec, StepSpec, WorkflowSpec
from agents.spec.expressions import until_is_cel

_JUDGE_YES = frozenset({"yes", "true", "done", "approved"})
# A JSON answer inside a Markdown code fence, as models often write one.
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True)
class LoopDecision:
    """What follows an iteration of a repeat-until loop (``decide``'s
    decision, with what applying it needs): ``done`` (``reason`` says why),
    ``judge`` (ask ``agent`` the ``prompt``, pass its answer to
    ``judge_decision``, then call ``next_iteration`` again with the verdict),
    ``more`` (create ``steps``, the next iteration), or ``fail`` (``reason``:
    the loop exhausted its iterations, its until failed to evaluate, an
    iteration did not complete, or the next iteration's steps would take the
    run past ``MAX_RUN_STEPS``)."""

    action: Literal["done", "judge", "more", "fail"]
    reason: str = ""
    output: str = ""  # done: what steps that depend on the loop read (its outputMode)
    agent: str = ""
    prompt: str = ""
    steps: tuple[RuntimeStep, ...] = ()
    delay: float = 0.0  # more: seconds to wait before creating ``steps``


@dataclass(frozen=True)
class Finished:
    """A loop's finished steps, by runtime id: their ``outputs`` and their
    ``statuses`` (a step not in ``statuses`` completed), what a CEL
    ``until`` reads as each step's ``content`` and ``status``."""

    outputs: Mapping[str, str]
    statuses: Mapping[str, str] = field(default_factory=dict)


def next_iteration(
    spec: WorkflowSpec,
    loop_runtime_id: str,
    finished_iteration: int,
    outputs: Mapping[str, str] | Finished,
    *,
    inputs: Mapping[str, Any] | None = None,
    verdict: bool | None = None,
    run_steps: int = 0,
) -> LoopDecision:
    """What follows iteration ``finished_iteration`` of the repeat-until
    loop ``loop_runtime_id``, every step of which completed (``outputs``
    maps runtime ids to step outputs, or is ``Finished`` with their
    statuses too: a step skipped for its condition), as ``decide``
    rules (agents/core/loops.py), with what the decision needs: ``done`` with
    the loop's output, ``fail``, ``judge`` with the judge's prompt, or
    ``more``: iteration N+1's steps, which get the last output as
    ``previous_output`` (and in the instructions of its first steps), or
    ``fail`` when those steps and the run's ``run_steps`` would be more than
    ``MAX_RUN_STEPS``. ``inputs`` are the run's inputs, needed when a
    dependency of the loop is a forEach loop. A missing output counts as
    empty."""
    finished = outputs if isinstance(outputs, Finished) else Finished(outputs)
    outputs = finished.outputs
    step, scope, deps = _locate(spec, loop_runtime_id, inputs or {}, outputs)
    loop = step.loop
    if loop is None or loop.kind != "repeat":
        raise ValueError(f"{loop_runtime_id!r} is not a repeat-until loop")
    ended = iteration_ended(loop, loop_runtime_id, finished_iteration, finished, verdict=verdict)
    decision = machine.decide(UNREAD, ended)[0]
    if isinstance(decision, EndLoop):
        if decision.status == "failed":
            return LoopDecision("fail", decision.reason)
        return LoopDecision("done", decision.reason, loop_output(loop, loop_runtime_id, finished_iteration, outputs))
    if isinstance(decision, AskJudge):
        judge = spec.agents.get(decision.agent)
        schema = judge.result_schema if judge is not None else None
        prompt = judge_prompt(loop_runtime_id, ended.last_id, ended.output, schema)
        return LoopDecision("judge", agent=decision.agent, prompt=prompt)
    n = finished_iteration + 1
    iteration = repeat_scope(scope, step, loop_runtime_id, n, ended.output)
    try:
        steps = tuple(expand_list(loop.steps, iteration, deps).steps)
    except ExpansionError as exc:
        return LoopDecision("fail", f"iteration {n}: {exc}")
    if run_steps + len(steps) > MAX_RUN_STEPS:
        return LoopDecision(
            "fail",
            f"iteration {n} would add {len(steps):,} steps to the run's {run_steps:,}; "
            f"a run has at most {MAX_RUN_STEPS:,}",
        )
    delay = decision.delay if isinstance(decision, NextIteration) else 0.0
    return LoopDecision("more", steps=steps, delay=delay)


def incomplete_iteration(loop_runtime_id: str, n: int) -> LoopDecision:
    """What follows iteration ``n`` of a repeat-until loop when a step of it
    did not complete, as ``decide`` rules: the loop fails."""
    (decision,) = machine.decide(UNREAD, IterationEnded(loop_runtime_id, n, 0, completed=False))
    assert isinstance(decision, EndLoop)
    return LoopDecision("fail", decision.reason)


def iteration_ended(
    loop: LoopSpec,
    loop_runtime_id: str,
    n: int,
    finished: Finished,
    *,
    verdict: bool | None = None,
) -> IterationEnded:
    """What ``decide`` is told when iteration ``n`` of ``loop`` ended. A CEL
    ``until`` reads zenflow's variables: ``steps`` (the iteration's steps by
    their bare ids and runtime ids, each with its own status: ``skipped``
    for one its condition skipped), ``content`` of its last step, ``status``
    (the iteration's: ``completed``), ``iteration`` (0-based)."""
    outputs = finished.outputs
    last_id = ids.repeat_id(loop_runtime_id, n, loop.steps[-1].id)
    output = outputs.get(last_id, "")
    is_cel = loop.until is not None and until_is_cel(loop.until)
    variables: dict[str, Any] = {}
    if is_cel:
        prefix = f"{loop_runtime_id}.{n}."
        steps: dict[str, Any] = {}
        for runtime_id, content in outputs.items():
            if runtime_id.startswith(prefix):
                status = finished.statuses.get(runtime_id, "completed")
                step = {"content": content, "status": status, "result": {}}
                steps[runtime_id] = steps[runtime_id[len(prefix) :]] = step
        variables = {
            "steps": steps,
            "iteration": n,
            "content": output,
            "status": "completed",
            "result": {},
            "item": None,
            "index": 0,
        }
    return IterationEnded(
        loop_runtime_id,
        n,
        loop.max_iterations or 1,
        last_id=last_id,
        output=output,
        until=loop.until,
        until_is_cel=is_cel,
        variables=variables,
        judge=loop.until_agent,
        verdict=verdict,
        delay=loop.delay or 0.0,
    )


def loop_output(loop: LoopSpec, runtime_id: str, last_iteration: int, outputs: Mapping[str, str]) -> str:
    """What steps that depend on a finished repeat-until loop read, by its
    ``outputMode``: its last inner step's output of the last iteration
    (``last``), or of every iteration, each under its number (``cumulative``)."""
    last = loop.steps[-1].id
    if loop.output_mode == "last":
        return outputs.get(ids.repeat_id(runtime_id, last_iteration, last), "")
    return "\n\n".join(
        f"## Iteration {n}\n{outputs.get(ids.repeat_id(runtime_id, n, last), '')}" for n in range(last_iteration + 1)
    )


def judge_prompt(loop_runtime_id: str, last_id: str, output: str, schema: Mapping[str, Any] | None = None) -> str:
    """What the ``untilAgent`` judge is asked after an iteration. A judge
    with a ``resultSchema`` (zenflow's) is asked to call ``submit_result``
    (``judge_tool``), whose ``done`` decides."""
    asked = f"Loop {loop_runtime_id} finished an iteration; its last step, {last_id}, answered:\n\n{clip(output)}\n\n"
    if schema is None:
        return asked + "Is the loop done? Answer yes or no first, then why."
    return (
        asked + "Is the loop done? Call `submit_result` with a result of this JSON Schema, "
        f'whose "done" is true when the loop is done: {json.dumps(schema)}'
    )


SUBMIT_RESULT = "submit_result"


def judge_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``submit_result`` tool a judge with a ``resultSchema`` decides
    with (zenflow's): its arguments are the result."""
    return {
        "type": "function",
        "function": {
            "name": SUBMIT_RESULT,
            "description": "Submit whether the loop is done, as a result of the given JSON Schema.",
            "parameters": dict(schema),
        },
    }


def judge_decision(answer: str, calls: Sequence[tuple[str, str]] = ()) -> bool:
    """Whether a judge's answer ends the loop: the boolean ``done`` of its
    ``submit_result`` call (``calls``: name and JSON arguments; zenflow's
    result), else of an answer that is a JSON object with one, else whether
    its first word is yes, true, done or approved (any case, punctuation
    ignored)."""
    for name, arguments in calls:
        if name == SUBMIT_RESULT:
            done = _result_done(arguments)
            if done is not None:
                return done
    done = _result_done(answer)
    if done is not None:
        return done
    words = answer.strip().split(maxsplit=1)
    first = words[0].strip(".,;:!?\"'*()[]").lower() if words else ""
    return first in _JUDGE_YES


def _result_done(answer: str) -> bool | None:
    """The boolean ``done`` of an answer that is a JSON object, or None."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    if not text.startswith("{"):
        return None
    try:
        result = bounded_json.loads(text, what="the judge's answer")
    except ValueError:
        return None
    done = result.get("done") if isinstance(result, dict) else None
    return done if isinstance(done, bool) else None


def _locate(
    spec: WorkflowSpec,
    loop_runtime_id: str,
    inputs: Mapping[str, Any],
    outputs: Mapping[str, str],
) -> tuple[StepSpec, Scope, tuple[str, ...]]:
    """The container step a runtime id names, the scope it runs in and what
    it waits for, rebuilt the way ``expand`` built them."""
    scope = root_scope(spec, inputs)
    steps: Sequence[StepSpec] = spec.steps
    entry: tuple[str, ...] = ()
    parts = ids.parse(loop_runtime_id)
    for n, part in enumerate(parts):
        step = next((s for s in steps if s.id == part.id), None)
        if step is None:
            raise ValueError(f"{loop_runtime_id!r}: no step {part.id!r} in {scope.namespace or 'the workflow'}")
        deps = expand_list(steps, scope, entry).deps[step.id]
        runtime_id = scope.runtime_id(step.id)
        if n == len(parts) - 1:
            return step, scope, deps
        if part.kind == "repeat" and step.loop is not None and step.loop.kind == "repeat":
            assert part.index is not None
            last = step.loop.steps[-1].id
            previous = outputs.get(ids.repeat_id(runtime_id, part.index - 1, last)) if part.index else None
            scope = repeat_scope(scope, step, runtime_id, part.index, previous)
            steps = step.loop.steps
        elif part.kind == "each" and step.loop is not None and step.loop.kind == "forEach":
            assert part.index is not None
            items = items_of(step, scope)
            if part.index >= len(items):
                raise ValueError(f"{loop_runtime_id!r}: {runtime_id} has no iteration {part.index}")
            scope = each_scope(scope, step, runtime_id, part.index, items[part.index])
            steps = step.loop.steps
        elif part.kind == "include" and step.included is not None:
            scope = include_scope(scope, step, runtime_id)
            steps = step.included.steps
        else:
            raise ValueError(f"{loop_runtime_id!r}: {runtime_id} is not entered that way")
        entry = deps
    raise ValueError(f"{loop_runtime_id!r} is not a runtime id")
