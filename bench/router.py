"""Router throughput: messages routed per second.

A routed message is one ``send`` (a step to the coordinator) or one
``forward`` (the coordinator to a step) that ends queued: its id taken, the
message stored in the recipient's mailbox, and its ``message_sent`` event
written. In memory that is InMemoryMailboxStore and a list sink. Persistent,
it is DjangoMailboxStore and DjangoEventSink, each message in its own
transaction that first takes the run row's lock, as a step turn does: the
run counters bumped, a Message row and an Event row inserted, a coordinator
wake requested, and after commit the dashboards notified and the wake task
published.

The exchange goes in rounds: each of four steps sends one message, the
coordinator forwards one to each step, then every mailbox is drained. Only
sends and forwards are timed; drains (untimed) keep mailboxes short, as in a
live run, so the mailbox-size check counts a few rows, not thousands.

Persistent, it is measured twice: one message per transaction, and a
round's four sends in one transaction and its four forwards in another, as
the messages of one turn (a coordinator forwarding to four steps) commit
together, with their events held and written in one statement, as a turn's
are (runs/stores.py events_held).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from bench.common import Context, Result, Target, run_child, skipped

STEPS = ("s1", "s2", "s3", "s4")
MEMORY_MESSAGES = (1_000, 10_000)
PERSISTENT_MESSAGES = 400
TARGET_MEMORY = Target(">=", 100_000, ">= 100,000/s")
TARGET_POSTGRES = Target(">=", 3_000, ">= 3,000/s")
UNIT = "msg/s"
NAME = "router: routed messages/s"

WORKFLOW_YAML = """\
name: bench-router
agents:
  worker:
    provider: scripted
    script: [{say: done}]
steps:
""" + "".join(f"  - {{id: {step}, agent: worker}}\n" for step in STEPS)


def exchange(
    router: Any,
    messages: int,
    each: Callable[[], Any] = contextlib.nullcontext,
    drain: Callable[[], None] | None = None,
    batched: bool = False,
) -> float:
    """Route ``messages`` messages through ``router`` and return how many per
    second the sends and forwards took. ``each`` wraps every call (a
    transaction, for the Django stores), or with ``batched`` each round's
    four sends and then its four forwards; ``drain`` empties the mailboxes
    between rounds (default: the router's drain of each mailbox)."""
    from agents.router import COORDINATOR

    clock = time.perf_counter
    elapsed = 0.0
    count = 0
    while count < messages:
        if batched:
            start = clock()
            with each():
                results = [router.send(step, f"{step} is {count} messages in") for step in STEPS]
            with each():
                results += [router.forward(step, f"news for {step} after {count} messages", "info") for step in STEPS]
            elapsed += clock() - start
            for result in results:
                _check(result)
        else:
            for step in STEPS:
                start = clock()
                with each():
                    result = router.send(step, f"{step} is {count} messages in")
                elapsed += clock() - start
                _check(result)
            for step in STEPS:
                start = clock()
                with each():
                    result = router.forward(step, f"news for {step} after {count} messages", "info")
                elapsed += clock() - start
                _check(result)
        count += 2 * len(STEPS)
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
    from agents.events import ListSink
    from agents.router import InMemoryMailboxStore, MessageRouter

    router = MessageRouter(InMemoryMailboxStore(), ListSink())
    for step in STEPS:
        router.register(step)
    return exchange(router, messages)


def persistent(messages: int, repeats: int, batched: bool = False) -> list[float]:
    """In a child process: one fresh run per repeat, with four steps."""
    from django.db import transaction
    from django.utils import timezone

    from agents.router import COORDINATOR, MessageRouter
    from runs.actions import do_register_workflow
    from runs.models import Message, Run, Step
    from runs.stores import DjangoEventSink, DjangoMailboxStore, events_held, lock_run

    workflow, _ = do_register_workflow(WORKFLOW_YAML, "bench/router.py")
    rates = []
    for _ in range(repeats):
        run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, started=timezone.now())
        Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
        Step.objects.bulk_create(
            Step(run=run, step_id=step, agent="worker", position=n, status=Step.Status.RUNNING)
            for n, step in enumerate(STEPS)
        )
        router = MessageRouter(DjangoMailboxStore(run.pk), DjangoEventSink(run.pk))

        @contextlib.contextmanager
        def in_transaction(run_id: int = run.pk):
            # A turn holds its events and writes them together (events_held);
            # a lone message's event is written with it.
            with transaction.atomic(), events_held(run_id) if batched else contextlib.nullcontext():
                lock_run(run_id)
                yield

        def mark_read(run_id: int = run.pk) -> None:
            # Untimed, and cheaper than the router's drain (no events): it
            # only keeps the mailboxes short between rounds.
            Message.objects.filter(run_id=run_id, drained=None).update(drained=timezone.now())

        rates.append(exchange(router, messages, in_transaction, mark_read, batched=batched))
    return rates


def measure(ctx: Context) -> list[Result]:
    results = []
    for messages in MEMORY_MESSAGES:
        values = [in_memory(messages) for _ in range(ctx.repeats)]
        results.append(
            Result(
                "router",
                f"{NAME} ({messages:,} msgs)",
                "memory",
                UNIT,
                values,
                target=TARGET_MEMORY,
                note="MessageRouter + InMemoryMailboxStore + ListSink, one thread",
            )
        )

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
    for label, make, problem in backends:
        for batched in (False, True):
            per = "4 per transaction" if batched else "1 per transaction"
            name = f"{NAME} ({PERSISTENT_MESSAGES:,} msgs, {per})"
            target = TARGET_POSTGRES if label.startswith("postgresql") else None
            if make is None:
                results.append(skipped("router", name, label, UNIT, problem, target=target))
                continue
            backend = make()
            values = run_child(
                "bench.router",
                "persistent",
                backend.env,
                messages=PERSISTENT_MESSAGES,
                repeats=ctx.repeats,
                batched=batched,
            )
            where = (
                "a round's 4 sends in one transaction, its 4 forwards in another, events held as in a turn"
                if batched
                else "each in its own transaction"
            )
            if backend.redis:
                from bench.common import clear_redis_queues

                clear_redis_queues("celery")  # the coordinator wakes the sends published
                note = f"{where}; wake task and broadcast go to Redis"
            else:
                note = f"{where}; wake task to the memory broker, in-memory channel layer"
            results.append(Result("router", name, label, UNIT, values, target=target, note=note))
    return results
