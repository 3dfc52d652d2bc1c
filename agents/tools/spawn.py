"""spawn_worker: the coordinator splits work into fresh worker steps.

A worker starts with a clean context: its task text and the outputs of the
steps it depends on, nothing of the coordinator's conversation. Independent
workers run in parallel; a worker waits for the steps in ``depends_on``.
Workers never get spawn_worker (it is a coordinator-only tool), so the
hierarchy is exactly two levels. Write conflicts are refused at spawn time:
two unfinished workers may not declare the same write target unless one
depends on the other (the host checks this, naming the conflicting step).
"""

from __future__ import annotations

from agents.tools.base import Tool, ToolContext
from agents.tools.builtin.result_models import SpawnedWorker, SpawnWorkerResult
from agents.tools.results import ToolAnswer
from agents.tools.worker_request import WorkerRequest


def _spawn(ctx: ToolContext, args: WorkerRequest) -> ToolAnswer:
    step_id = ctx.require_host().spawn_worker(ctx, args)
    return ToolAnswer(SpawnedWorker(step_id=step_id, depends_on=list(args.depends_on)).model_dump())


SPAWN_WORKER = Tool(
    "spawn_worker",
    "Add a worker step to this run with a fresh context: only its task and the outputs of the steps it "
    "depends on. Independent workers run in parallel. Returns the new step id.",
    WorkerRequest,
    frozenset({"coordinator"}),
    _spawn,
    toolset="orchestration",
    inline=True,
    tags=("management",),
    result_model=SpawnWorkerResult,
)
