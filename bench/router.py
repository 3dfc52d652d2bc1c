"""Router throughput: messages routed per second.

A routed message is one ``send`` (a step to the coordinator) or one
``forward`` (the coordinator to a step) that ends queued: its id taken, the
message stored in the recipient's mailbox, and its ``message_sent`` event
written. In memory that is InMemoryMailboxStore and a list sink.

Persistent, it is a unit of work's mailbox store and sink
(runs/store/unit_of_work.py) inside a transaction that first takes the run
row's lock and holds the events and messages routed in it, as a turn does: the run
counters moved, the Message and Event rows inserted, a coordinator wake
requested, and after commit the dashboards notified and the wake task
published. It is measured with 1, 4 and 16 messages per transaction: a
turn that sends one message, and turns routing several (a coordinator
forwarding to each of its steps), whose messages commit together.

The exchange goes in rounds: the steps (four) send ``per`` messages in
turn, the coordinator forwards ``per`` to them in turn, then every mailbox
is drained. Only sends and forwards are timed; drains (untimed) keep
mailboxes short, as in a live run, so the mailbox-size check counts a few
rows, not thousands.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable
from typing import Any

from bench.common import Context, Result, Target, run_child, skipped

STEPS = ("s1", "s2", "s3", "s4")
MEMORY_MESSAGES = (1_000, 10_000)
# Runs of each in-memory figure at least, whatever --repeat says: one takes
# a few milliseconds, and on a shared VM three of them can all land in one
# slow moment.
MEMORY_MIN_RUNS = 9
PERSISTENT_MESSAGES = 640
PER_TRANSACTION = (1, 4, 16)
TARGET_MEMORY = Target(">=", 100_000, ">= 100,000/s")
UNIT = "msg/s"
NAME = "router: routed messages/s"

WORKFLOW_YAML = """\
name: bench-router
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{say: done}]
steps:
""" + "".join(f"  - {{id: {step}, agent: worker}}\n" for step in STEPS)


def exchange(
    router: Any,
    messages: int,
    each: Callable[[str], Any] = contextlib.nullcontext,
    drain: Callable[[], None] | None = None,
    per: int = 1,
) -> float:
    """Route ``messages`` messages through ``router`` and return how many per
    second the sends and forwards took. A round is ``per`` sends (the steps
    in turn) and then ``per`` forwards (to the steps in turn); ``each``
    wraps each call (a transaction, for the Django stores), or with ``per``
    above 1 the round's sends together and then its forwards, as one turn's
    messages commit together, and is given which ("send" or "forward");
    ``drain`` empties the mailboxes between rounds (default: the router's
    drain of each mailbox)."""
    from agents.router import COORDINATOR

    clock = time.perf_counter
    elapsed = 0.0
    count = 0
    # per 1 still sends one message from each step: a round is 8 messages.
    steps = [STEPS[n % len(STEPS)] for n in range(max(per, len(STEPS)))]
    while count < messages:
        sends = [("send", step, f"{step} is {count} messages in") for step in steps]
        forwards = [("forward", step, f"news for {step} after {count} messages") for step in steps]
        groups = [sends, forwards] if per > 1 else [[call] for call in sends + forwards]
        for group in groups:
            start = clock()
            with each(group[0][0]):
                results = [
                    router.send(step, text) if kind == "send" else router.forward(step, text, "info")
                    for kind, step, text in group
                ]
            elapsed += clock() - start
            for result in results:
                _check(result)
        count += len(sends) + len(forwards)
        if drain is not None:
            drain()
        else:
            for mailbox in (COORDINATOR, *STEPS):
                router.drain(mailbox)
    return count / elapsed


def _check(result: Any) -> None:
    # A dropped message would be a different (cheaper) path: refuse to count it.
    if result.status != "queued":
        raise RuntimeError(f"the bench's message was not queued: {result.text}")


def in_memory(messages: int) -> float:
    """Messages per second through the in-memory router. The objects this
    process already holds (Django and every module the bench loaded, about
    190,000) are frozen out of the garbage collector's passes meanwhile: a
    full pass over them takes longer than routing 10,000 messages, and lands
    in about a third of those runs, which would then measure a third of the
    rate (60,000/s against 200,000/s). What is measured is the router and the
    objects it makes."""
    from agents.events import ListSink
    from agents.router import InMemoryMailboxStore, MessageRouter

    router = MessageRouter(InMemoryMailboxStore(), ListSink())
    for step in STEPS:
        router.register(step)
    gc.collect()
    gc.freeze()
    try:
        return exchange(router, messages)
    finally:
        gc.unfreeze()


def persistent(messages: int, repeats: int, per: int = 1) -> list[float]:
    """In a child process: one fresh run per repeat, with four steps."""
    from django.db import transaction
    from django.utils import timezone

    from agents.router import COORDINATOR, MessageRouter
    from runs.actions import do_register_workflow
    from runs.models import Message, Run, Step
    from runs.store.unit_of_work import UnitOfWork

    workflow, _ = do_register_workflow(WORKFLOW_YAML, "bench/router.py")
    rates = []
    for _ in range(repeats):
        run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, started=timezone.now())
        Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
        Step.objects.bulk_create(
            Step(run=run, step_id=step, agent="worker", position=n, status=Step.Status.RUNNING)
            for n, step in enumerate(STEPS)
        )
        uow = UnitOfWork(run.pk)
        router = MessageRouter(uow.mailboxes, uow.sink)

        @contextlib.contextmanager
        def in_transaction(kind: str, uow: UnitOfWork = uow):
            # As a turn: the run locked, its events and messages held and
            # written together; the coordinator's (coordinator.py) reads the
            # message counter right after taking the lock.
            with transaction.atomic(), uow:
                uow.lock()
                yield

        def mark_read(run_id: int = run.pk) -> None:
            # Untimed, and cheaper than the router's drain (no events): it
            # only keeps the mailboxes short between rounds.
            Message.objects.filter(run_id=run_id, drained=None).update(drained=timezone.now())

        rates.append(exchange(router, messages, in_transaction, mark_read, per=per))
        # Ended, so that the workers of a later measurement (on this database)
        # do not take it for a silent run and wake its coordinator.
        Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, finished=timezone.now())
    return rates


CALIBRATION_STATEMENTS = 2_000


def calibration(statements: int, repeats: int) -> dict[str, list[float]]:
    """In a child process on PostgreSQL, with plain psycopg (no Django, no
    zenweb): what this machine's PostgreSQL does from one process, to read
    the routing figures against.

    - ``inserts``: single-row autocommit INSERTs per second, the usual
      yardstick of what a PostgreSQL server writes;
    - ``transactions``: per second, the least a routing transaction does:
      BEGIN, a row's lock (SELECT ... FOR UPDATE), one UPDATE of it, COMMIT.
      Routing one message per transaction cannot go faster than this."""
    import psycopg

    url = os.environ["DATABASE_URL"]
    rates: dict[str, list[float]] = {"inserts": [], "transactions": []}
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_calibration (id bigserial PRIMARY KEY, n integer NOT NULL)")
        try:
            for _ in range(repeats):
                conn.execute("TRUNCATE bench_calibration RESTART IDENTITY")
                start = time.perf_counter()
                for n in range(statements):
                    conn.execute("INSERT INTO bench_calibration (n) VALUES (%s)", [n])
                rates["inserts"].append(statements / (time.perf_counter() - start))
                start = time.perf_counter()
                for _ in range(statements):
                    with conn.transaction():
                        conn.execute("SELECT 1 FROM bench_calibration WHERE id = %s FOR UPDATE", [1])
                        conn.execute("UPDATE bench_calibration SET n = n + 1 WHERE id = %s", [1])
                rates["transactions"].append(statements / (time.perf_counter() - start))
        finally:
            conn.execute("DROP TABLE bench_calibration")
    return rates


def measure(ctx: Context) -> list[Result]:
    results = [_memory_row(ctx, messages) for messages in MEMORY_MESSAGES]
    backends: list[tuple[str, Callable[[], Any] | None, str]] = [("sqlite", ctx.sqlite, "")]
    backends.append(("postgresql", (lambda: ctx.postgres()) if not ctx.pg_problem else None, ctx.pg_problem or ""))
    if not ctx.pg_problem:
        backends.append(
            (
                "postgresql+redis",
                (lambda: ctx.postgres(redis=True)) if not ctx.redis_problem else None,
                ctx.redis_problem or "",
            )
        )
        results += _calibration_rows(ctx)
    for label, make, problem in backends:
        for per in PER_TRANSACTION:
            results.append(_persistent_row(ctx, label, make, problem, per))
    return results


def _memory_row(ctx: Context, messages: int) -> Result:
    values = [in_memory(messages) for _ in range(max(ctx.repeats, MEMORY_MIN_RUNS))]
    return Result(
        "router",
        f"{NAME} ({messages:,} msgs)",
        "memory",
        UNIT,
        values,
        target=TARGET_MEMORY,
        note="MessageRouter + InMemoryMailboxStore + ListSink, one thread",
    )


def _calibration_rows(ctx: Context) -> list[Result]:
    """What plain psycopg does on this PostgreSQL: the rows to read
    routing's rates against."""
    rates = run_child(
        "bench.router",
        "calibration",
        ctx.postgres().env,
        statements=CALIBRATION_STATEMENTS,
        repeats=ctx.repeats,
    )
    return [
        Result(
            "router",
            "calibration: single-row autocommit INSERTs/s",
            "postgresql",
            "rows/s",
            rates["inserts"],
            note="plain psycopg, one process",
        ),
        Result(
            "router",
            "calibration: BEGIN + row lock + UPDATE + COMMIT, transactions/s",
            "postgresql",
            "tx/s",
            rates["transactions"],
            note="plain psycopg, one process: the most transactions routing 1 message each could commit",
        ),
    ]


def _persistent_row(ctx: Context, label: str, make: Callable[[], Any] | None, problem: str, per: int) -> Result:
    """Routing through the database ``make`` gives (skipped with ``problem``
    without one), ``per`` messages to a transaction."""
    name = f"{NAME} ({PERSISTENT_MESSAGES:,} msgs, {per} per transaction)"
    # PostgreSQL routing is reported with no target: its rate is the machine's,
    # read against the calibration rows.
    target = None
    if make is None:
        return skipped("router", name, label, UNIT, problem, target=target)
    backend = make()
    values = run_child(
        "bench.router", "persistent", backend.env, messages=PERSISTENT_MESSAGES, repeats=ctx.repeats, per=per
    )
    where = "each in a turn of its own" if per == 1 else f"{per} sends in a turn, {per} forwards in another"
    if backend.redis:
        from bench.common import clear_redis_queues

        clear_redis_queues("celery")  # the coordinator wakes the sends published
        note = f"{where}; wake task and broadcast go to Redis"
    else:
        note = f"{where}; wake task to the memory broker, in-memory channel layer"
    return Result("router", name, label, UNIT, values, target=target, note=note)
