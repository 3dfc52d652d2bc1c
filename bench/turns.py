"""`python -m bench.turns`: the orchestration bench's fan-out run (with
``--cap N``, each of its loops capped at N running iterations, so that every
step's end is followed by a scheduling pass under the run's lock; with
``--report``, a step after the loops that waits for every iteration; with
``--chain``, the chain bench's 20-step chain instead) in this one process, its
Celery tasks run inline one after another, to see what a step turn itself
costs: wall time and CPU per step, the tasks run, and with ``--profile`` a
cProfile of one run. A tool for finding the next cost to
cut, not a figure against a target (bench/orchestration.py is that).

It runs against the database the environment names (DATABASE_URL, else the
embedded SQLite file) and writes runs there: point it at a scratch database,

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/zenweb_prof \\
        .venv/bin/python manage.py migrate
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/zenweb_prof \\
        .venv/bin/python -m bench.turns --profile cumulative

Tasks are taken from ``apply_async`` into a queue and run by this process,
so nothing here measures Celery, the broker or the channel layer.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import time
from typing import Any


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")
    os.environ.setdefault("ZENWEB_LLM", "scripted")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # as the bench's workers run, without the query log
    import django

    django.setup()
    from celery.app.task import Task

    from bench import chain, orchestration
    from runs.actions import do_register_workflow

    loops = tuple(f"l{n}" for n in range(args.loops))
    yaml = (
        chain.WORKFLOW_YAML
        if args.chain
        else orchestration.workflow_yaml(args.cap or orchestration.ITEMS, report=args.report, loops=loops)
    )
    workflow, _ = do_register_workflow(yaml, "bench/turns.py")
    driver = _Inline(workflow, chain=args.chain, task=args.task)

    def enqueue(task, args=None, kwargs=None, *_positional, **options):
        driver.enqueue(task, args, kwargs)

    Task.apply_async = enqueue  # this process runs every task, in order
    driver.one_run(4)  # warm: imports, caches, prepared statements
    steps = chain.LENGTH if args.chain else len(loops) * args.items
    for _ in range(args.runs):
        driver.tasks.clear()
        driver.spent.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        status = driver.one_run(args.items)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"{status}: {steps} steps, {wall * 1000 / steps:.2f} ms and {cpu * 1000 / steps:.2f} ms of CPU a step; "
            + ", ".join(
                f"{name} x{count} ({driver.spent[name] * 1000 / count:.2f} ms each)"
                for name, count in driver.tasks.most_common()
            )
        )
    if args.profile:
        driver.profile = cProfile.Profile()
        driver.one_run(args.items)
        pstats.Stats(driver.profile).sort_stats(args.profile).print_stats(50)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.turns", description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100, help="items per forEach loop (default 100)")
    parser.add_argument(
        "--loops", type=int, default=5, help="forEach loops (default 5; 10 of 100 items: the most steps a run may have)"
    )
    parser.add_argument("--cap", type=int, help="each forEach loop's maxConcurrency (default: its item count)")
    parser.add_argument("--report", action="store_true", help="a step after every loop, which waits for them all")
    parser.add_argument("--chain", action="store_true", help="the chain bench's 20 sequential steps instead")
    parser.add_argument("--runs", type=int, default=2, help="timed runs (default 2)")
    parser.add_argument("--profile", metavar="SORT", help="profile one more run, sorted by SORT (cumulative, tottime)")
    parser.add_argument("--task", metavar="NAME", help="profile only this task (runs.tasks.start_run, say)")
    return parser.parse_args(argv)


class _Inline:
    """Runs of ``workflow`` with their Celery tasks run in this process, one
    after another in the order they were queued: how many of each task ran,
    and the wall seconds they took, by task name. With ``profile`` set, the
    tasks (only those named ``task``, if given) run under it."""

    def __init__(self, workflow: Any, *, chain: bool, task: str | None) -> None:
        self.workflow = workflow
        self.chain = chain
        self.task = task
        self.queue: collections.deque = collections.deque()
        self.tasks: collections.Counter[str] = collections.Counter()
        self.spent: collections.Counter[str] = collections.Counter()
        self.profile: cProfile.Profile | None = None

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> None:
        self.queue.append((task, args or (), kwargs or {}))
        self.tasks[task.name] += 1

    def one_run(self, items: int) -> str:
        """Start a run of ``items`` items per loop, run its tasks to the end;
        its status."""
        from bench import orchestration
        from runs.actions import do_create_run
        from runs.models import Run

        run = do_create_run(self.workflow, {} if self.chain else {"items": orchestration.items_input(items)})
        while self.queue:
            task, task_args, task_kwargs = self.queue.popleft()
            profile = self.profile if self.task in (None, task.name) else None
            if profile is not None:
                profile.enable()
            start = time.perf_counter()
            task.run(*task_args, **task_kwargs)
            self.spent[task.name] += time.perf_counter() - start
            if profile is not None:
                profile.disable()
        return Run.objects.values_list("status", flat=True).get(pk=run.pk)


if __name__ == "__main__":
    main()
