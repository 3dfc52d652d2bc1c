"""The plain-SQL reads of a live update (runs/store/sql/live.py) give what the
ORM gave: the header's steps done and tokens by role (coordinator, steps,
spawned workers), the touched step rows with their unread counts, the
events after a cursor. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import transaction

from agents.events import Event as RuntimeEvent
from runs.actions import router_for
from runs.actions.budgets import token_totals, totals_from, totals_of
from runs.models import Step
from runs.store.sql import store
from runs.store.unit_of_work import UnitPerEventSink

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_header_sums_tokens_by_role_and_counts_finished_work(two_step_run):
    run = two_step_run
    Step.objects.filter(run=run, step_id="coordinator").update(prompt_tokens=100, completion_tokens=7)
    Step.objects.filter(run=run, step_id="s1").update(prompt_tokens=40, completion_tokens=4, status="completed")
    worker = {"agent": "worker", "spawned_by": "call-1", "status": "failed"}
    Step.objects.create(run=run, step_id="w1", prompt_tokens=9, completion_tokens=1, **worker)

    loaded, ended, total, token_sums = store().live_run_header(run.pk)
    tokens = totals_from(token_sums)

    assert (loaded.pk, loaded.workflow.name, loaded.created_by) == (run.pk, "store-sql", None)
    # s1 and w1 ended; s2 runs; the coordinator is not work
    assert (ended, total) == ({"completed": 1, "failed": 1, "skipped": 0, "cancelled": 0}, 3)
    assert tokens == totals_of(run.steps.all()) == token_totals(run)
    assert (tokens.coordinator.total, tokens.steps.total, tokens.workers.total) == (107, 44, 10)


def test_step_rows_come_with_their_unread_counts(two_step_run):
    run = two_step_run
    with transaction.atomic():
        store().lock_run(run.pk)
        for n in range(3):
            router_for(run.pk).forward("s2", f"note {n}")

    rows = store().live_step_rows(run.pk, {"s2", "s1", "nope"})

    assert [(step.step_id, step.unread) for step in rows] == [("s1", 0), ("s2", 3)]
    assert rows[0].get_deferred_fields() >= {"transcript", "variables"}


def test_events_after_a_cursor_in_order_up_to_a_limit(two_step_run):
    run = two_step_run
    sink = UnitPerEventSink(run.pk)
    for n in range(5):
        said = {"turn": n, "agent": "a", "content": "<b>as written</b>", "tool_calls": []}
        sink.emit(RuntimeEvent("agent_turn", "s1", said | {"prompt_tokens": None, "completion_tokens": None}))

    events = store().live_events_after(run.pk, 1, 3)

    assert [(event.seq, event.data["turn"]) for event in events] == [(2, 1), (3, 2), (4, 3)]
    assert events[0].data["content"] == "<b>as written</b>"
