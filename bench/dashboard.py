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

from agents.events import Event, run_events
from agents.events.tool_events import ToolCall as ToolCallEvent
from bench.common import Context, Result, Target, run_child, skipped

EVENTS = 50_000
RUNS = 10_000
REQUESTS = 9
# The run page (its graph included) and the event page; the runs list.
TARGETS = {
    "run_page": Target("<", 100, "< 100 ms"),
    "event_page": Target("<", 100, "< 100 ms"),
    "runs_list": Target("<", 150, "< 150 ms"),
    "graph_card": None,
}
STEPS = [f"step-{n}" for n in range(1, 9)]
PAGES = {
    "run_page": "run page /runs/<id>/ (50,000 events)",
    "event_page": "event page /runs/<id>/events/ (50,000 events)",
    "runs_list": "runs list / (10,000 runs)",
    # The run page's graph alone (the card a big run's page fetches): its share of the run page.
    "graph_card": "graph card /runs/<id>/graph/ (50,000 events)",
}

WORKFLOW_YAML = """\
name: bench-dashboard
agents:
  worker:
    description: worker agent
    provider: scripted
    script: [{say: done}]
steps:
""" + "".join(f"  - {{id: {step}, agent: worker, instructions: Report on part {n}.}}\n" for n, step in enumerate(STEPS))

PROSE = (
    "Checked the region's deployment status: the canary is healthy, error rates are flat and the rollout can "
    "continue to the next batch of hosts."
)


def _events_of_run(events: int) -> tuple[list[Event], int]:
    """What a chatty run leaves: each step's turns send a message that the
    coordinator forwards to the next step. Returns the events, each made
    from its model, and the number of send_message calls."""
    rows = [Event.of(run_events.WorkflowStart(workflow="bench-dashboard", version=1, inputs={}, steps=STEPS))]
    rows += [Event.of(run_events.StepStart(agent="worker"), step) for step in STEPS]
    tail = [Event.of(run_events.StepEnd(status="completed", output=f"{step}: {PROSE}"), step) for step in STEPS]
    tail.append(Event.of(run_events.WorkflowEnd(status="completed", result=PROSE, error="")))
    block = 7
    calls = 0
    while len(rows) + block + len(tail) <= events:
        calls += 1
        rows += _message_passed_on(calls)
    rows += [Event.of(run_events.CoordinatorNarration(text=PROSE), "coordinator")] * (events - len(rows) - len(tail))
    return rows + tail, calls


def _message_passed_on(call: int) -> list[Event]:
    """The events of send_message call number ``call`` (from 1): a step's
    turn sends a message to the coordinator, which forwards it to the next
    step, which drains it."""
    step, target = STEPS[(call - 1) % len(STEPS)], STEPS[call % len(STEPS)]
    send, forward = f"msg-send-{2 * call - 1}", f"msg-fwd-{2 * call}"
    call_id = f"call-worker-{call}-1"
    text = f"for {target}: {PROSE}"
    meta: dict[str, str | None] = {
        "run_id": "1",
        "session_id": step,
        "turn_id": f"{step}-{call}",
        "tool_call_id": call_id,
    }
    turn = run_events.AgentTurn(
        turn=call, agent="worker", content="", tool_calls=["send_message"], prompt_tokens=None, completion_tokens=None
    )
    start = ToolCallEvent(
        phase="start", tool_call_id=call_id, name="send_message", arguments=f'{{"text": "{text}"}}', meta=meta
    )
    end = ToolCallEvent(phase="end", tool_call_id=call_id, name="send_message", ok=True, result=f"queued: {send}")
    return [
        Event.of(turn, step),
        Event.of(start, step),
        Event.of(
            run_events.MessageSent(message_id=send, sender=step, to="coordinator", msg_type="info", content=text), step
        ),
        Event.of(end, step),
        Event.of(
            run_events.CoordinatorInboxMessage(message_id=send, sender=step, msg_type="info", content=text),
            "coordinator",
        ),
        Event.of(
            run_events.MessageSent(message_id=forward, sender="coordinator", to=target, msg_type="info", content=PROSE),
            "coordinator",
        ),
        Event.of(run_events.AgentInboxDrain(message_id=forward, sender="coordinator", msg_type="info"), target),
    ]


def seed(events: int, runs: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from runs.actions import do_register_workflow

    started = time.monotonic()
    user = get_user_model().objects.create_user("bench-dashboard")
    workflow, _ = do_register_workflow(WORKFLOW_YAML, "bench/dashboard.py")
    now = timezone.now()
    rows, calls = _events_of_run(events)
    with transaction.atomic():
        big = _seed_chatty_run(workflow, user, rows, calls, now)
    with transaction.atomic():
        _seed_other_runs(workflow, user, runs - 1, now)
    return {"user_id": user.pk, "run_id": big.pk, "events": len(rows), "seed_s": time.monotonic() - started}


def _seed_chatty_run(workflow: Any, user: Any, rows: list[Event], calls: int, now: Any) -> Any:
    """The run of eight steps with the events ``rows``, their messages and
    their tool calls."""
    from runs.models import Event as StoredEvent
    from runs.models import Run, Step, ToolCall

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
    coordinator = {"step_id": "coordinator", "kind": Step.Kind.COORDINATOR, "agent": "coordinator"}
    Step.objects.create(run=big, status=Step.Status.COMPLETED, turns=calls, **coordinator)
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
    stored = (
        StoredEvent(run=big, seq=seq, type=event.type, step_id=event.step_id, data=event.data)
        for seq, event in enumerate(rows, 1)
    )
    StoredEvent.objects.bulk_create(stored, batch_size=5_000)
    _seed_messages(big, calls, now)
    tool_calls = (
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
    )
    ToolCall.objects.bulk_create(tool_calls, batch_size=5_000)
    return big


def _seed_messages(big: Any, calls: int, now: Any) -> None:
    """Each send_message call's message to the coordinator and its forward, drained."""
    from runs.models import Message

    messages = []
    for n in range(1, calls + 1):
        step, target = STEPS[(n - 1) % len(STEPS)], STEPS[n % len(STEPS)]
        sent = {"message_id": f"msg-send-{2 * n - 1}", "sender": step, "recipient": "coordinator"}
        messages.append(Message(run=big, type="info", content=f"for {target}: {PROSE}", drained=now, **sent))
        forward = {"message_id": f"msg-fwd-{2 * n}", "sender": "coordinator", "recipient": target}
        messages.append(Message(run=big, type="info", content=PROSE, drained=now, **forward))
    Message.objects.bulk_create(messages, batch_size=5_000)


def _seed_other_runs(workflow: Any, user: Any, runs: int, now: Any) -> None:
    """``runs`` finished runs of three steps each, for the runs list."""
    from runs.models import Run, Step

    statuses = [Run.Status.COMPLETED, Run.Status.COMPLETED, Run.Status.PARTIAL, Run.Status.FAILED, Run.Status.CANCELLED]
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
            for n in range(runs)
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


def pages(events: int, runs: int, requests: int) -> dict[str, Any]:
    """In a child process: seed, then time each page."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    seeded = seed(events, runs)
    if connection.vendor == "postgresql":
        # As autovacuum would within its minute after a load this size: the
        # planner sees the seeded run's 7,000 tool calls, not the empty tables'
        # statistics, and no analyze runs while the pages are timed.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    client = Client()
    client.force_login(get_user_model().objects.get(pk=seeded["user_id"]))
    urls = {
        "run_page": reverse("runs:detail", args=[seeded["run_id"]]),
        "event_page": reverse("runs:events", args=[seeded["run_id"]]),
        "runs_list": reverse("runs:list"),
        "graph_card": reverse("runs:graph", args=[seeded["run_id"]]),
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
            results += [
                skipped("dashboard", name, label, "ms", problem, target=TARGETS[page]) for page, name in PAGES.items()
            ]
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
                    target=TARGETS[page],
                    note=note,
                )
            )
    return results
