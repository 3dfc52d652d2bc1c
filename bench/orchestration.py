"""Orchestration overhead: a fan-out of 500 independent steps on zenweb's
workers, against a bare Celery fan-out of 500 no-op tasks on the same broker
and the same number of worker processes.

A workflow has at most 100 steps (agents/spec/fields.py MAX_STEPS) and a forEach
loop at most 100 items (agents/expansion.py MAX_FOR_EACH_ITEMS), so the 500
steps are five forEach loops over one 100-item input: 5 steps in the file,
500 at run time, all independent, maxConcurrency 500. Each step's scripted
agent answers at once. zenweb's time runs from do_create_run to the run's
terminal status (start_run, 500 step turns, the scheduling after each, the
coordinator's finish wake); bare Celery's from enqueueing one fan_out task,
which enqueues 500 no-ops, to the last no-op done.

With Redis and PostgreSQL: `celery -A zenweb worker` processes (prefork,
4 children each, as in the Procfile; bench.common) on PostgreSQL, and
`celery -A bench.bare_celery worker` processes started the same way, 1 and
then 2 of each, all up at once; a bare fan-out and a zenweb run alternate,
and each zenweb run is compared with the bare run just before it. Without
them: the embedded layout, one process with worker threads on the memory
broker and SQLite.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from agents.spec.options import WorkflowOptions
from bench import cpu
from bench.common import REDIS_URL as BENCH_REDIS_URL
from bench.common import (
    WORKER_CONCURRENCY,
    WORKER_POOL,
    Backend,
    Context,
    Result,
    Target,
    clear_redis_queues,
    log_trouble,
    run_child,
    skipped,
    wait_for_terminal,
    worker_processes,
)

LOOPS = ("a", "b", "c", "d", "e")
ITEMS = 100
WIDTH = len(LOOPS) * ITEMS
WARMUP_ITEMS = 4
TARGET = Target("<=", 2, "<= 2x")
# Pairs of runs (bare, then zenweb) at least, whatever --repeat says: on a
# shared 2-core VM one pair's ratio moves by 0.5x either way (2.3x to 3.3x
# in one sitting), and the median of three followed it. A pair takes a few
# seconds; --budget still bounds them.
MIN_PAIRS = 7
EMBEDDED_CONCURRENCY = 4  # ZENWEB_EMBEDDED_CONCURRENCY's default


def workflow_yaml(loop_cap: int | None = ITEMS, *, report: bool = False, loops: tuple[str, ...] = LOOPS) -> str:
    """The fan-out's workflow; ``loop_cap`` (each loop's maxConcurrency) below
    ITEMS makes every loop's cap bind (bench/turns.py ``--cap``); ``report``
    adds a step that depends on every loop (a fan-in: bench/turns.py
    ``--report``). ``loop_cap`` None and one loop: CAPPED_YAML."""
    report_step = (
        f"""  - id: report
    agent: worker
    instructions: Report on every item.
    dependsOn: [{", ".join(loops)}]
"""
        if report
        else ""
    )
    defaults = loop_cap is None  # no option of its own: the run's default maxConcurrency
    return (
        f"""\
# bench/orchestration.py: {len(loops) * ITEMS} independent steps, as {len(loops)} forEach
# loop(s) over one {ITEMS}-item input (a workflow has at most 100 steps and a
# forEach loop at most 100 items){", default options" if defaults else ""}.
name: bench-fanout{"-capped" if defaults else ""}
inputs:
  items:
    type: string
    required: true
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{{say: "done $item"}}]
"""
        + ("" if defaults else f"options:\n  maxConcurrency: {len(loops) * ITEMS}\n")
        + "steps:\n"
        + "".join(
            f"""  - id: {loop}
    loop:
      forEach: items
"""
            + ("" if defaults else f"      maxConcurrency: {loop_cap}\n")
            + """      steps:
        - {id: work, agent: worker, instructions: "Handle $item."}
"""
            for loop in loops
        )
        + report_step
    )


WORKFLOW_YAML = workflow_yaml()

# The fan-out a workflow gets without options: one forEach loop of 100
# items under the run's default maxConcurrency (DEFAULT_CAP), which binds: each
# step's end is decided under the run's lock (docs/concurrency.md). No
# target: what a user waits for per step when they set no cap of their own.
DEFAULT_CAP = WorkflowOptions().max_concurrency
CAPPED_YAML = workflow_yaml(None, loops=("a",))


def items_input(count: int) -> str:
    """The ``items`` input of a run over ``count`` items (item-0, item-1...)."""
    return ",".join(f"item-{n}" for n in range(count))


def run_to_end(workflow: Any, items: int, timeout: float = 600, loops: int = len(LOOPS)) -> tuple[float, int]:
    """Seconds from do_create_run to a terminal run of ``loops`` forEach
    loops over ``items`` items, and its completed steps."""
    from runs.actions import do_create_run
    from runs.models import Run, Step

    start = time.perf_counter()
    run = do_create_run(workflow, {"items": items_input(items)})
    status = wait_for_terminal(run.pk, timeout)
    elapsed = time.perf_counter() - start
    completed = Step.objects.filter(run=run, kind=Step.Kind.STEP, status=Step.Status.COMPLETED).count()
    if status != Run.Status.COMPLETED or completed != loops * items:
        error = Run.objects.values_list("error", flat=True).get(pk=run.pk)
        raise RuntimeError(f"run {run.pk} ended {status} with {completed} steps completed: {error}")
    return elapsed, completed


def drive(yaml_path: str, repeats: int, embedded: bool, budget: float) -> list[float]:
    """In a child process: register the workflow, warm the workers up with a
    small run, then time up to ``repeats`` full runs: fewer when another
    would take the time past ``budget`` seconds (always at least one)."""
    from runs.actions import do_register_workflow

    if embedded:
        from zenweb.embedded import start_worker_thread

        start_worker_thread(EMBEDDED_CONCURRENCY)
    workflow, _ = do_register_workflow(Path(yaml_path).read_text(), yaml_path)
    run_to_end(workflow, WARMUP_ITEMS)
    walls = [run_to_end(workflow, ITEMS)[0]]
    while len(walls) < repeats and sum(walls) + max(walls) <= budget:
        walls.append(run_to_end(workflow, ITEMS)[0])
    return walls


def drive_pairs(
    yaml_path: str, capped_yaml_path: str, repeats: int, budget: float, zenweb_pids: list[int], bare_pids: list[int]
) -> dict[str, list]:
    """In a child process, with both sets of worker processes up: time a
    bare Celery fan-out and then a zenweb run, ``repeats`` times (fewer past
    ``budget`` seconds), so that each pair sees the machine in the same
    state: on a shared VM its speed moves by a third within minutes, and
    runs of one side minutes apart from the other's measured that, not
    zenweb. Idle, each side's workers wait on the broker and cost nothing.

    Also the CPU seconds each run cost: the bare run its worker processes
    (``bare_pids`` and their children), the zenweb run its worker processes
    (``zenweb_pids``) and the PostgreSQL backends of the bench's database
    (None where /proc or a local PostgreSQL is not there). And after each
    pair, a run of the fan-out under the default cap (CAPPED_YAML)."""
    from bench import bare_celery
    from runs.actions import do_register_workflow

    workflow, _ = do_register_workflow(Path(yaml_path).read_text(), yaml_path)
    capped, _ = do_register_workflow(Path(capped_yaml_path).read_text(), capped_yaml_path)
    bare_celery.fan_out_and_wait(len(LOOPS) * WARMUP_ITEMS)
    run_to_end(workflow, WARMUP_ITEMS)
    run_to_end(capped, 2 * DEFAULT_CAP, loops=1)
    measured: dict[str, list] = {
        "zenweb": [],
        "bare": [],
        "zenweb_cpu": [],
        "postgres_cpu": [],
        "bare_cpu": [],
        "capped": [],
    }
    zenweb, bare = measured["zenweb"], measured["bare"]
    while not zenweb or (len(zenweb) < repeats and sum(zenweb) + sum(bare) + max(zenweb) <= budget):
        before = cpu.tree_seconds(bare_pids)
        bare.append(bare_celery.fan_out_and_wait(WIDTH))
        measured["bare_cpu"].append(_spent(before, cpu.tree_seconds(bare_pids)))
        before, backends = cpu.tree_seconds(zenweb_pids), _backend_seconds()
        zenweb.append(run_to_end(workflow, ITEMS)[0])
        measured["zenweb_cpu"].append(_spent(before, cpu.tree_seconds(zenweb_pids)))
        measured["postgres_cpu"].append(_backends_spent(backends, _backend_seconds()))
        measured["capped"].append(run_to_end(capped, ITEMS, loops=1)[0])
    return measured


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _backend_seconds() -> dict[int, float] | None:
    """CPU seconds of each PostgreSQL backend connected to this database,
    by pid: None unless PostgreSQL runs on this machine (a pid of another
    host's would name a process of this one)."""
    from django.db import connection

    if connection.settings_dict["HOST"] not in ("", "localhost", "127.0.0.1", "::1"):
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [pid for (pid,) in cursor.fetchall()]
    return cpu.seconds_by_pid(pids)


def _backends_spent(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """What the backends spent between two readings (one that connected in
    between: all it spent)."""
    if before is None or after is None:
        return None
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _rows(
    layout: str, zenweb: list[float], bare: list[float], note: str, ctx: Context, *, paired: bool
) -> list[Result]:
    per_step = [seconds * 1000 / WIDTH for seconds in zenweb]
    per_task = [seconds * 1000 / WIDTH for seconds in bare]
    bare_wall = statistics.median(bare)
    if paired:  # each zenweb run over the bare run just before it
        ratios = [seconds / before for seconds, before in zip(zenweb, bare, strict=True)]
        compared = "each zenweb run over the bare Celery run just before it"
    else:  # each zenweb run over bare Celery's median
        ratios = [seconds / bare_wall for seconds in zenweb]
        compared = "each zenweb run over bare Celery's median"
    zenweb_wall = statistics.median(zenweb)
    wanted = max(ctx.repeats, MIN_PAIRS) if paired else ctx.repeats
    return [
        Result(
            "orchestration",
            f"fan-out {WIDTH} steps: zenweb, per step",
            layout,
            "ms",
            per_step,
            higher_is_better=False,
            note=f"{note}; zenweb wall {zenweb_wall:.1f} s (do_create_run to completed)"
            + (f"; {len(zenweb)} of {wanted} runs timed (--budget {ctx.budget:.0f} s)" if len(zenweb) < wanted else ""),
        ),
        Result(
            "orchestration",
            f"fan-out {WIDTH} no-op tasks: bare Celery, per task",
            layout,
            "ms",
            per_task,
            higher_is_better=False,
            note=f"{note}; bare wall {bare_wall:.2f} s (enqueue to last no-op)",
        ),
        Result(
            "orchestration",
            "per-step overhead, zenweb / bare Celery",
            layout,
            "x",
            ratios,
            higher_is_better=False,
            target=TARGET,
            note=f"{WIDTH} steps = {len(LOOPS)} forEach loops x {ITEMS} items (100-step and 100-item limits); "
            + compared,
        ),
    ]


def measure(ctx: Context) -> list[Result]:
    yaml_path = ctx.tmp / "bench-fanout.yaml"
    yaml_path.write_text(WORKFLOW_YAML)
    capped_yaml_path = ctx.tmp / "bench-fanout-capped.yaml"
    capped_yaml_path.write_text(CAPPED_YAML)
    if ctx.pg_problem or ctx.redis_problem:
        return _measure_embedded(ctx, yaml_path)
    backend = ctx.postgres(redis=True)
    results = []
    for processes in (1, 2):
        results += _measure_workers(ctx, backend, processes, yaml_path, capped_yaml_path)
    return results


def _measure_embedded(ctx: Context, yaml_path: Path) -> list[Result]:
    """Without PostgreSQL or Redis: zenweb and bare Celery each in one
    process, with worker threads, on SQLite and the memory broker."""
    why = " and ".join(name for name, p in (("PostgreSQL", ctx.pg_problem), ("Redis", ctx.redis_problem)) if p)
    backend = ctx.sqlite()
    layout = "embedded: memory broker + sqlite, 1 process"
    zenweb = run_child(
        "bench.orchestration",
        "drive",
        backend.env,
        yaml_path=str(yaml_path),
        repeats=ctx.repeats,
        embedded=True,
        budget=ctx.budget,
    )
    bare = run_child(
        "bench.bare_celery",
        "drive",
        backend.env,
        width=WIDTH,
        repeats=ctx.repeats,
        warmup=len(LOOPS) * WARMUP_ITEMS,
        embedded_concurrency=EMBEDDED_CONCURRENCY,
    )
    note = f"{EMBEDDED_CONCURRENCY} worker threads in one process ({why} not reachable)"
    return _rows(layout, zenweb, bare, note, ctx, paired=False)


def _measure_workers(
    ctx: Context, backend: Backend, processes: int, yaml_path: Path, capped_yaml_path: Path
) -> list[Result]:
    """``processes`` worker processes each for zenweb and bare Celery, on
    Redis and PostgreSQL (``backend``), their runs alternated."""
    from bench.bare_celery import QUEUE

    logs = ctx.tmp / "logs"
    bare_env = backend.env | {"BENCH_BROKER_URL": BENCH_REDIS_URL}
    layout = f"redis+postgresql, {processes} worker{'s' if processes > 1 else ''}"
    note = f"{processes} x `celery worker --pool {WORKER_POOL} -c {WORKER_CONCURRENCY}` each, alternated"
    clear_redis_queues("celery", QUEUE)
    with (
        worker_processes("zenweb", processes, backend.env, logs / f"zenweb-{processes}") as zenweb_workers,
        worker_processes("bench.bare_celery", processes, bare_env, logs / f"bare-{processes}") as bare_workers,
    ):
        measured = run_child(
            "bench.orchestration",
            "drive_pairs",
            bare_env,
            yaml_path=str(yaml_path),
            capped_yaml_path=str(capped_yaml_path),
            repeats=max(ctx.repeats, MIN_PAIRS),
            budget=ctx.budget,
            zenweb_pids=[worker.pid for worker in zenweb_workers],
            bare_pids=[worker.pid for worker in bare_workers],
        )
    clear_redis_queues("celery", QUEUE)
    trouble = log_trouble(logs / f"zenweb-{processes}") or log_trouble(logs / f"bare-{processes}")
    if trouble:
        note += f"; DISTURBED: {trouble}"
    rows = _rows(layout, measured["zenweb"], measured["bare"], note, ctx, paired=True)
    return rows + _cpu_rows(layout, measured) + [_capped_row(layout, measured["capped"], note)]


def _capped_row(layout: str, walls: list[float], note: str) -> Result:
    return Result(
        "orchestration",
        f"fan-out {ITEMS} steps at the default maxConcurrency ({DEFAULT_CAP}): zenweb, per step",
        layout,
        "ms",
        [seconds * 1000 / ITEMS for seconds in walls],
        higher_is_better=False,
        note=f"{note}; one forEach loop, no options: each step's end decided under the run's lock; "
        "one run after each pair",
    )


def _cpu_rows(layout: str, measured: dict[str, list]) -> list[Result]:
    """The CPU each run cost, per step or task (no target: where the time of
    a wall bound by the CPU goes; docs/benchmarks.md)."""
    workers, no_proc = "the worker processes and their children", "no /proc here"
    rows = (
        ("zenweb_cpu", "fan-out CPU per step: zenweb's worker processes", workers, no_proc),
        (
            "postgres_cpu",
            "fan-out CPU per step: PostgreSQL",
            "the backends connected to the bench's database",
            f"{no_proc}, or PostgreSQL on another host",
        ),
        ("bare_cpu", "fan-out CPU per task: bare Celery's worker processes", workers, no_proc),
    )
    results = []
    for key, name, whose, unmeasured in rows:
        readings = measured[key]
        if None in readings:
            results.append(skipped("orchestration", name, layout, "ms", unmeasured))
            continue
        per = [seconds * 1000 / WIDTH for seconds in readings]
        note = f"CPU time of {whose}, from /proc"
        results.append(Result("orchestration", name, layout, "ms", per, higher_is_better=False, note=note))
    return results
