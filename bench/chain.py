"""A sequential chain: 20 steps, each depending on the one before, on one
zenweb worker, against a bare Celery chain of 20 no-op tasks on the same
broker in the same run.

What a user waits for in a pipeline is the time from one step's end to the
next step's start; a fan-out hides it behind its width, a chain adds it up.
zenweb's time runs from do_create_run to the run's terminal status (start_run,
20 step turns one after the other, each completion starting the next, the
coordinator's finish wake); bare Celery's from sending a `celery.chain` of 20
immutable no-op signatures to the last no-op done (each link is published by
the worker that ran the one before, as Celery chains are).

Each pair is also run at 40 steps and 40 no-ops: the difference, per step
past the 20th, is what one more step costs, without the run's start and the
coordinator's finish (a model's turn, with a real model), which a bare chain
has nothing like. Those rows have no target: they say where the time goes.

With Redis and PostgreSQL: one `celery -A zenweb worker` process and one
`celery -A bench.bare_celery worker` process, started as the Procfile starts
them (bench.common), both up at once; a bare chain and a zenweb run
alternate, and each zenweb run is compared with the bare chain just before
it. Without them: the embedded layout, one process with worker threads on
the memory broker and SQLite.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.common import REDIS_URL as BENCH_REDIS_URL
from bench.common import (
    WORKER_CONCURRENCY,
    WORKER_POOL,
    Context,
    Result,
    Target,
    clear_redis_queues,
    log_trouble,
    run_child,
    wait_for_terminal,
    worker_processes,
)

LENGTH = 20
LONG = 2 * LENGTH  # the longer chain of each pair (see the module's docstring)
TARGET = Target("<=", 1.5, "<= 1.5x")
# A chain takes a fraction of a second, so more pairs than the fan-out's 7
# fit in the same budget, and the machine's moods average out better.
MIN_PAIRS = 15
EMBEDDED_CONCURRENCY = 4  # ZENWEB_EMBEDDED_CONCURRENCY's default


def workflow_yaml(length: int) -> str:
    return f"""\
# bench/chain.py: {length} steps, each depending on the one before.
name: bench-chain-{length}
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{{say: "done"}}]
steps:
  - {{id: s1, agent: worker, instructions: "Step 1."}}
""" + "".join(
        f'  - {{id: s{n}, agent: worker, instructions: "Step {n}.", dependsOn: [s{n - 1}]}}\n'
        for n in range(2, length + 1)
    )


WORKFLOW_YAML = workflow_yaml(LENGTH)


def run_to_end(workflow, length: int = LENGTH, timeout: float = 300) -> float:
    """Seconds from do_create_run to a completed run of all ``length`` steps,
    by the run's own ``finished`` (the clock reading its end took): the
    poll only says when to look (ended by it, every wall fell on its 10 ms
    grid, and a pair's ratio jumped between 1.4x and 1.7x with nothing else
    changed)."""
    import time

    from runs.actions import do_create_run
    from runs.models import Run, Step

    start = time.time()
    run = do_create_run(workflow, {})
    status = wait_for_terminal(run.pk, timeout)
    completed = Step.objects.filter(run=run, kind=Step.Kind.STEP, status=Step.Status.COMPLETED).count()
    if status != Run.Status.COMPLETED or completed != length:
        error = Run.objects.values_list("error", flat=True).get(pk=run.pk)
        raise RuntimeError(f"run {run.pk} ended {status} with {completed} steps completed: {error}")
    return Run.objects.values_list("finished", flat=True).get(pk=run.pk).timestamp() - start


def drive_pairs(
    yaml_path: str, long_yaml_path: str, repeats: int, budget: float, embedded: bool = False
) -> dict[str, list[float]]:
    """In a child process, with both workers up (or, ``embedded``, started
    here as threads): a warm-up of each, then a bare chain and a zenweb run
    alternately, ``repeats`` pairs (fewer past ``budget`` seconds), each
    pair at LENGTH and at LONG."""
    from bench import bare_celery
    from runs.actions import do_register_workflow

    if embedded:
        from zenweb.embedded import start_worker_thread

        start_worker_thread(EMBEDDED_CONCURRENCY)
        bare_celery.start_worker_thread(EMBEDDED_CONCURRENCY)
    workflow, _ = do_register_workflow(Path(yaml_path).read_text(), yaml_path)
    long_workflow, _ = do_register_workflow(Path(long_yaml_path).read_text(), long_yaml_path)
    bare_celery.chain_and_wait(LENGTH)
    run_to_end(workflow)
    walls: dict[str, list[float]] = {"zenweb": [], "bare": [], "zenweb_long": [], "bare_long": []}

    def another_fits() -> bool:
        # One more pair takes about what the pairs so far took on average.
        pairs = len(walls["zenweb"])
        spent = sum(sum(values) for values in walls.values())
        return pairs < repeats and spent * (pairs + 1) / pairs <= budget

    while not walls["zenweb"] or another_fits():
        walls["bare"].append(bare_celery.chain_and_wait(LENGTH))
        walls["zenweb"].append(run_to_end(workflow))
        walls["bare_long"].append(bare_celery.chain_and_wait(LONG))
        walls["zenweb_long"].append(run_to_end(long_workflow, LONG))
    return walls


def _rows(layout: str, walls: dict[str, list[float]], note: str, ctx: Context) -> list[Result]:
    return _whole_chain_rows(layout, walls, note, ctx) + _past_the_start_rows(layout, walls)


def _whole_chain_rows(layout: str, walls: dict[str, list[float]], note: str, ctx: Context) -> list[Result]:
    """A chain of LENGTH: zenweb's and bare Celery's time per step, and their ratio."""
    zenweb, bare = walls["zenweb"], walls["bare"]
    wanted = max(ctx.repeats, MIN_PAIRS)
    timed = f"; {len(zenweb)} of {wanted} pairs timed (--budget {ctx.budget:.0f} s)" if len(zenweb) < wanted else ""
    return [
        Result(
            "chain",
            f"chain {LENGTH} steps: zenweb, per step",
            layout,
            "ms",
            [seconds * 1000 / LENGTH for seconds in zenweb],
            higher_is_better=False,
            note=f"{note}; zenweb wall {statistics.median(zenweb) * 1000:.0f} ms (do_create_run to completed){timed}",
        ),
        Result(
            "chain",
            f"chain {LENGTH} no-op tasks: bare Celery, per task",
            layout,
            "ms",
            [seconds * 1000 / LENGTH for seconds in bare],
            higher_is_better=False,
            note=f"{note}; bare wall {statistics.median(bare) * 1000:.0f} ms (send to last no-op)",
        ),
        Result(
            "chain",
            "per-step time in a chain, zenweb / bare Celery",
            layout,
            "x",
            [seconds / before for seconds, before in zip(zenweb, bare, strict=True)],
            higher_is_better=False,
            target=TARGET,
            note=f"{LENGTH} steps each depending on the one before; "
            "each zenweb run over the bare Celery chain just before it",
        ),
    ]


def _past_the_start_rows(layout: str, walls: dict[str, list[float]]) -> list[Result]:
    """Each step past the LENGTH-th (the LONG chain's wall less the LENGTH
    chain's): a step's cost without the run's start and finish."""
    added = LONG - LENGTH
    # Each pair's own (the machine's speed swings between pairs).
    zenweb_more = [
        (long - short) * 1000 / added for short, long in zip(walls["zenweb"], walls["zenweb_long"], strict=True)
    ]
    bare_more = [(long - short) * 1000 / added for short, long in zip(walls["bare"], walls["bare_long"], strict=True)]
    return [
        Result(
            "chain",
            f"chain: each step past the {LENGTH}th, zenweb",
            layout,
            "ms",
            zenweb_more,
            higher_is_better=False,
            note=f"({LONG}-step wall - {LENGTH}-step wall) / {added}, each pair's: a step's cost "
            "without the run's start and finish",
        ),
        Result(
            "chain",
            f"chain: each no-op past the {LENGTH}th, bare Celery",
            layout,
            "ms",
            bare_more,
            higher_is_better=False,
            note=f"({LONG}-task wall - {LENGTH}-task wall) / {added}, each pair's",
        ),
        Result(
            "chain",
            f"each step past the {LENGTH}th, zenweb / bare Celery",
            layout,
            "x",
            [more / bare_step for more, bare_step in zip(zenweb_more, bare_more, strict=True) if bare_step > 0],
            higher_is_better=False,
            note="no target: the row above the issue's figure, without start and finish",
        ),
    ]


def measure(ctx: Context) -> list[Result]:
    yaml_path = ctx.tmp / "bench-chain.yaml"
    yaml_path.write_text(WORKFLOW_YAML)
    long_yaml_path = ctx.tmp / "bench-chain-long.yaml"
    long_yaml_path.write_text(workflow_yaml(LONG))
    repeats = max(ctx.repeats, MIN_PAIRS)
    if ctx.pg_problem or ctx.redis_problem:
        why = " and ".join(name for name, p in (("PostgreSQL", ctx.pg_problem), ("Redis", ctx.redis_problem)) if p)
        backend = ctx.sqlite()
        walls = run_child(
            "bench.chain",
            "drive_pairs",
            backend.env,
            yaml_path=str(yaml_path),
            long_yaml_path=str(long_yaml_path),
            repeats=repeats,
            budget=ctx.budget,
            embedded=True,
        )
        note = f"{EMBEDDED_CONCURRENCY} worker threads in one process ({why} not reachable)"
        return _rows("embedded: memory broker + sqlite, 1 process", walls, note, ctx)

    from bench.bare_celery import QUEUE

    backend = ctx.postgres(redis=True)
    logs = ctx.tmp / "logs"
    bare_env = backend.env | {"BENCH_BROKER_URL": BENCH_REDIS_URL}
    note = f"1 x `celery worker --pool {WORKER_POOL} -c {WORKER_CONCURRENCY}` each, alternated"
    clear_redis_queues("celery", QUEUE)
    with (
        worker_processes("zenweb", 1, backend.env, logs / "chain-zenweb"),
        worker_processes("bench.bare_celery", 1, bare_env, logs / "chain-bare"),
    ):
        walls = run_child(
            "bench.chain",
            "drive_pairs",
            bare_env,
            yaml_path=str(yaml_path),
            long_yaml_path=str(long_yaml_path),
            repeats=repeats,
            budget=ctx.budget,
        )
    clear_redis_queues("celery", QUEUE)
    trouble = log_trouble(logs / "chain-zenweb") or log_trouble(logs / "chain-bare")
    if trouble:
        note += f"; DISTURBED: {trouble}"
    return _rows("redis+postgresql, 1 worker", walls, note, ctx)
