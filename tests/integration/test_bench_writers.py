"""The bench's own writers write what the app accepts: a bench row that
stops measuring (an event its writer makes no longer fits its typed model)
fails here, not silently as "not measured" in `make bench`."""

from __future__ import annotations

import pytest

from bench import live
from runs.models import Event
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_live_benchs_writer_stores_its_events(owner):
    run_id = live.new_run(owner.pk, register("relay").pk)

    written = live.write(run_id, events=7, rate=0)

    assert len(written["committed"]) == 7
    stored = Event.objects.filter(run_id=run_id).values_list("seq", "type")
    assert list(stored) == [(n, "agent_turn") for n in range(1, 8)]


def test_the_dashboard_benchs_seed_stores_a_chatty_run_and_the_runs_list():
    from agents.events import parse
    from bench import dashboard
    from runs.models import Message, Run, ToolCall

    seeded = dashboard.seed(events=200, runs=4)

    big = Run.objects.get(pk=seeded["run_id"])
    events = list(Event.objects.filter(run=big).order_by("seq").values_list("seq", "type", "data"))
    assert [seq for seq, _, _ in events] == list(range(1, 201))
    for _, type_, data in events:
        parse(type_, data)  # every row fits its type's model
    calls = ToolCall.objects.filter(run=big).count()
    assert calls > 0 and Message.objects.filter(run=big).count() == 2 * calls
    assert big.steps.count() == 1 + len(dashboard.STEPS)
    assert Run.objects.filter(created_by_id=seeded["user_id"]).count() == 4
