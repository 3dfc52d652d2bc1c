"""Tool calls as tasks: one step whose model asks, in one turn, for 20 tool
calls that each take 1 s (``run_shell`` with ``sleep 1``).

Each call runs as its own Celery task, so the step should finish in about
20 / (total worker concurrency) seconds, not 20: ceil(20 / concurrency)
waves of 1 s, plus the run's start, the step's two turns and the
coordinator's finish (the target allows 1.5 s for those). The same step with
``toolExecution: inline`` (the calls one after another in the step's turn)
is timed once next to it for reference.

With Redis and PostgreSQL: 1 and then 2 `celery -A zenweb worker` processes
(bench.common's pool and concurrency). Without them: the embedded layout,
one process with ZENWEB_EMBEDDED_CONCURRENCY worker threads.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from bench.common import (
    WORKER_CONCURRENCY,
    WORKER_POOL,
    Context,
    Result,
    Target,
    clear_redis_queues,
    run_child,
    wait_for_terminal,
    worker_processes,
)

CALLS = 20
SECONDS = 1
EMBEDDED_CONCURRENCY = 4  # ZENWEB_EMBEDDED_CONCURRENCY's default


def workflow_yaml(execution: str) -> str:
    calls = ", ".join(f'{{tool: run_shell, args: {{command: "sleep {SECONDS} && echo {n}"}}}}' for n in range(CALLS))
    return f"""\
# bench/tool_calls.py: one turn, {CALLS} calls of {SECONDS} s each.
name: bench-tool-calls-{execution}
agents:
  caller:
    description: caller agent
    provider: scripted
    tools: [run_shell]
    script:
      - calls: [{calls}]
      - say: "done"
options:
  toolExecution: {execution}
steps:
  - id: fan
    agent: caller
"""


def run_to_end(workflow: Any, timeout: float = 300) -> float:
    """Seconds from do_create_run to the completed run."""
    from runs.actions import do_create_run
    from runs.models import Run

    start = time.perf_counter()
    run = do_create_run(workflow, {})
    status = wait_for_terminal(run.pk, timeout, poll=0.01)
    elapsed = time.perf_counter() - start
    if status != Run.Status.COMPLETED:
        error = Run.objects.values_list("error", flat=True).get(pk=run.pk)
        raise RuntimeError(f"run {run.pk} ended {status}: {error}")
    return elapsed


def drive(tasks_yaml: str, inline_yaml: str, repeats: int, embedded: bool, inline: bool) -> dict[str, list[float]]:
    """In a child process: time the tasks layout ``repeats`` times and, if
    asked, the inline layout once."""
    from runs.actions import do_register_workflow

    if embedded:
        from zenweb.embedded import start_worker_thread

        start_worker_thread(EMBEDDED_CONCURRENCY)
    tasks, _ = do_register_workflow(Path(tasks_yaml).read_text(), tasks_yaml)
    walls = {"tasks": [run_to_end(tasks) for _ in range(repeats)], "inline": []}
    if inline:
        one_by_one, _ = do_register_workflow(Path(inline_yaml).read_text(), inline_yaml)
        walls["inline"] = [run_to_end(one_by_one)]
    return walls


def _rows(layout: str, walls: dict[str, list[float]], concurrency: int) -> list[Result]:
    # Waves of calls: 20 calls on 8 workers take three 1 s waves.
    ideal = math.ceil(CALLS / concurrency) * SECONDS
    rows = [
        Result(
            "tool_calls",
            f"{CALLS} calls x {SECONDS} s in one turn, as tasks",
            layout,
            "s",
            walls["tasks"],
            higher_is_better=False,
            # "About" 20 / concurrency: the waves, plus the run's start, the
            # step's two turns and the coordinator's finish (well under 1.5 s).
            target=Target("<=", ideal + 1.5, f"<= {ideal:.0f} s of waves + 1.5 s"),
            note=f"total worker concurrency {concurrency}; inline it would take {CALLS * SECONDS} s",
        )
    ]
    if walls["inline"]:
        rows.append(
            Result(
                "tool_calls",
                f"{CALLS} calls x {SECONDS} s in one turn, inline (toolExecution: inline)",
                layout,
                "s",
                walls["inline"],
                higher_is_better=False,
                note="for reference: the calls one after another in the step's turn",
            )
        )
    return rows


def measure(ctx: Context) -> list[Result]:
    tasks_yaml = ctx.tmp / "bench-tool-calls-tasks.yaml"
    inline_yaml = ctx.tmp / "bench-tool-calls-inline.yaml"
    tasks_yaml.write_text(workflow_yaml("tasks"))
    inline_yaml.write_text(workflow_yaml("inline"))
    paths = {"tasks_yaml": str(tasks_yaml), "inline_yaml": str(inline_yaml), "repeats": ctx.repeats}
    if ctx.pg_problem or ctx.redis_problem:
        backend = ctx.sqlite()
        walls = run_child("bench.tool_calls", "drive", backend.env, embedded=True, inline=True, **paths)
        layout = "embedded: memory broker + sqlite, 1 process"
        return _rows(layout, walls, EMBEDDED_CONCURRENCY)

    backend = ctx.postgres(redis=True)
    results = []
    for processes in (1, 2):
        layout = f"redis+postgresql, {processes} x `--pool {WORKER_POOL} -c {WORKER_CONCURRENCY}`"
        clear_redis_queues("celery")
        with worker_processes("zenweb", processes, backend.env, ctx.tmp / "logs" / f"tool-calls-{processes}"):
            walls = run_child("bench.tool_calls", "drive", backend.env, embedded=False, inline=processes == 1, **paths)
        results += _rows(layout, walls, processes * WORKER_CONCURRENCY)
    return results
