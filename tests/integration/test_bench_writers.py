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
