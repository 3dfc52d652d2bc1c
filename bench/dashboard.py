"""Dashboard server time: the run page and event page of a run with 50,000
events, and the runs list of a user with 10,000 runs.

In a child process, per database: the data is written with bulk_create (a
run of eight steps talking through the coordinator: events with gapless
seq, their messages and tool calls; the other runs with three steps each),
then Django's test Client, logged in, requests each page once to warm up
and then several times. Server time is the time ``Client.get`` takes: URL
resolution, middleware, view, queries and template, with no network.
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import Context, Result, Target, run_child, skipped

EVENTS = 50_000
RUNS = 10_000
REQUESTS = 9
TARGET = Target("<", 150, "< 150 ms")
STEPS = [f"step-{n}" for n in range(1, 9)]
PAGES = {
    "run_page": "run page /runs/<id>/ (50,000 events)",
    "event_page": "event page /runs/<id>/events/ (50,000 events)",
    "runs_list": "runs list / (10,000 runs)",
}

WORKFLOW_YAML = """\
name: bench-dashboard
agents:
  worker:
    provider: scripted
    script: [{say: done}]
steps:
""" + "".join(f"  - {{id: {step}, agent: worker, instructions: Report on part {n}.}}\n" for n, step in enumerate(STEPS))

PROSE = (
    "Checked the region's deployment status: the canary is healthy, error rates are flat and the rollout can "
    "continue to the next batch of hosts."
)


def _events_of_run(events: int) -> tuple[list[tuple[str, str, dict]], int]:
    """What a chatty run leaves: each step's turns send a message that the
    coordinator forwards to the next step. Returns (type, step, data) rows
    and the number of send_message calls."""
    rows: list[tuple[str, str, dict]] = [("workflow_start", "", {"workflow": "bench-dashboard", "steps": STEPS})]
    rows += [("step_start", step, {"agent": "worker"}) for step in STEPS]
    tail = [("step_end", step, {"status": "completed", "output": f"{step}: {PROSE}"}) for step in STEPS]
    tail.append(("workflow_end", "", {"status": "completed", "result": PROSE, "error": ""}))
    block = 7
    calls = 0
    while len(rows) + block + len(tail) <= events:
        step = STEPS[calls % len(STEPS)]
        target = STEPS[(calls + 1) % len(STEPS)]
        calls += 1
        send, forward = f"msg-send-{2 * calls - 1}", f"msg-fwd-{2 * calls}"
        call_id = f"call-worker-{calls}-1"
        text = f"for {target}: {PROSE}"
        rows += [
            (
                "agent_turn",
                step,
                {"turn": calls, "agent": "worker", "content": "", "tool_calls": ["send_message"]},
            ),
            (
                "tool_call",
                step,
                {
                    "phase": "start",
                    "tool_call_id": call_id,
                    "name": "send_message",
                    "arguments": f'{{"text": "{text}"}}',
                    "meta": {"run_id": "1", "session_id": step, "turn_id": f"{step}-{calls}", "tool_call_id": call_id},
                },
            ),
            (
                "message_sent",
                step,
                {"message_id": send, "from": step, "to": "coordinator", "msg_type": "info", "content": text},
            ),
            (
                "tool_call",
                step,
                {
                    "phase": "end",
                    "tool_call_id": call_id,
                    "name": "send_message",
                    "ok": True,
                    "result": f"queued: {send}",
                },
            ),
            (
                "coordinator_inbox_message",
                "coordinator",
                {"message_id": send, "from": step, "msg_type": "info", "content": text},
            ),
            (
                "message_sent",
                "coordinator",
                {"message_id": forward, "from": "coordinator", "to": target, "msg_type": "info", "content": PROSE},
            ),
            ("agent_inbox_drain", target, {"message_id": forward, "from": "coordinator", "msg_type": "info"}),
        ]
    rows += [("coordinator_narration", "coordinator", {"text": PROSE})] * (events - len(rows) - len(tail))
    return rows + tail, calls


def seed(events: int, runs: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from runs.actions import do_register_workflow
    from runs.models import Event, Message, Run, Step, ToolCall

    started = time.monotonic()
    user = get_user_model().objects.create_user("bench-dashboard")
    workflow, _ = do_register_workflow(WORKFLOW_YAML, "bench/dashboard.py")
    now = timezone.now()
    rows, calls = _events_of_run(events)
    with transaction.atomic():
        big = Run.objects.create(
            workflow=workflow,
            created_by=user,
            status=Run.Status.COMPLETED,
            started=now,
            finished=now,
            result=PROSE,
            command="bench: a chatty run",
            last_event_seq=len(rows),
            last_message_no=2 * calls,
        )
        Step.objects.create(
            run=big,
            step_id="coordinator",
            kind=Step.Kind.COORDINATOR,
            agent="coordinator",
            status=Step.Status.COMPLETED,
            turns=calls,
        )
        steps = Step.objects.bulk_create(
            Step(
                run=big,
                step_id=step,
                agent="worker",
                position=n,
                status=Step.Status.COMPLETED,
                output=f"{step}: {PROSE}",
                turns=calls // len(STEPS),
                prompt_tokens=120_000,
                completion_tokens=9_000,
                started=now,
                finished=now,
            )
            for n, step in enumerate(STEPS)
        )
        by_id = {step.step_id: step for step in steps}
        Event.objects.bulk_create(
            (
                Event(run=big, seq=seq, type=type_, step_id=step, data=data)
                for seq, (type_, step, data) in enumerate(rows, 1)
            ),
            batch_size=5_000,
        )
        messages = []
        for n in range(1, calls + 1):
            step, target = STEPS[(n - 1) % len(STEPS)], STEPS[n % len(STEPS)]
            messages.append(
                Message(
                    run=big,
                    message_id=f"msg-send-{2 * n - 1}",
                    sender=step,
                    recipient="coordinator",
                    type="info",
                    content=f"for {target}: {PROSE}",
                    drained=now,
                )
            )
            messages.append(
                Message(
                    run=big,
                    message_id=f"msg-fwd-{2 * n}",
                    sender="coordinator",
                    recipient=target,
                    type="info",
                    content=PROSE,
                    drained=now,
                )
            )
        Message.objects.bulk_create(messages, batch_size=5_000)
        ToolCall.objects.bulk_create(
            (
                ToolCall(
                    run=big,
                    step=by_id[STEPS[(n - 1) % len(STEPS)]],
                    tool_call_id=f"call-worker-{n}-1",
                    name="send_message",
                    arguments='{"text": "..."}',
                    result=f"queued: msg-send-{2 * n - 1}",
                    counted=False,
                )
                for n in range(1, calls + 1)
            ),
            batch_size=5_000,
        )
    statuses = [Run.Status.COMPLETED, Run.Status.COMPLETED, Run.Status.PARTIAL, Run.Status.FAILED, Run.Status.CANCELLED]
    with transaction.atomic():
        others = Run.objects.bulk_create(
            (
                Run(
                    workflow=workflow,
                    created_by=user,
                    status=statuses[n % len(statuses)],
                    command=f"bench run {n}",
                    result=PROSE,
                    started=now,
                    finished=now,
                )
                for n in range(runs - 1)
            ),
            batch_size=5_000,
        )
        Step.objects.bulk_create(
            (
                Step(run=run, step_id=step, agent="worker", position=n, status=Step.Status.COMPLETED)
                for run in others
                for n, step in enumerate(STEPS[:3])
            ),
            batch_size=5_000,
        )
    return {"user_id": user.pk, "run_id": big.pk, "events": len(rows), "seed_s": time.monotonic() - started}


def pages(events: int, runs: int, requests: int) -> dict[str, Any]:
    """In a child process: seed, then time each page."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    seeded = seed(events, runs)
    client = Client()
    client.force_login(get_user_model().objects.get(pk=seeded["user_id"]))
    urls = {
        "run_page": reverse("runs:detail", args=[seeded["run_id"]]),
        "event_page": reverse("runs:events", args=[seeded["run_id"]]),
        "runs_list": reverse("runs:list"),
    }
    timings: dict[str, list[float]] = {}
    queries: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for page, url in urls.items():
        response = client.get(url)  # warm-up: templates compiled, caches filled
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        sizes[page] = len(response.content)
        with CaptureQueriesContext(connection) as captured:
            client.get(url)
        queries[page] = len(captured.captured_queries)
        timings[page] = []
        for _ in range(requests):
            start = time.perf_counter()
            client.get(url)
            timings[page].append((time.perf_counter() - start) * 1000)
    return {"timings": timings, "queries": queries, "bytes": sizes, **seeded}


def measure(ctx: Context) -> list[Result]:
    results = []
    backends = [("sqlite", ctx.sqlite, None), ("postgresql", ctx.postgres, ctx.pg_problem)]
    for label, make, problem in backends:
        if problem:
            results += [skipped("dashboard", name, label, "ms", problem, target=TARGET) for name in PAGES.values()]
            continue
        data = run_child("bench.dashboard", "pages", make().env, events=EVENTS, runs=RUNS, requests=REQUESTS)
        for page, name in PAGES.items():
            note = f"{data['queries'][page]} queries, {data['bytes'][page] / 1024:,.0f} KiB of HTML"
            results.append(
                Result(
                    "dashboard",
                    name,
                    label,
                    "ms",
                    data["timings"][page],
                    higher_is_better=False,
                    target=TARGET,
                    note=note,
                )
            )
    return results
