"""maxConcurrency holds while workers race: the run's cap on running steps
and each forEach loop's cap on running iterations are never passed, at any
point of the run's history, by steps that end and start on several worker
threads, on SQLite and on PostgreSQL (and, in
tests/services/test_caps_across_processes.py, several worker processes).

The history is the event log in seq order: a step's step_start is written
in the transaction that makes it running and its step_end in the one that
ends it, and seqs follow commit order (docs/concurrency.md), so counting
along the seqs gives what ran at once as the database saw it."""

from __future__ import annotations

import re

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)

RUN_CAP = 4
LOOP_CAPS = {"wide": 3, "narrow": 2}
ITERATION = re.compile(r"^(wide|narrow)\[(\d+)\]\.")


def most_at_once(run: Run) -> tuple[int, dict[str, int]]:
    """The most steps running at once, and the most iterations of each loop
    under way at once (begun and not every step of it ended), along the
    run's events in seq order."""
    members: dict[str, int] = {}
    for step_id in run.steps.exclude(kind__in=("coordinator", "loop")).values_list("step_id", flat=True):
        if match := ITERATION.match(step_id):
            key = f"{match[1]}[{match[2]}]"
            members[key] = members.get(key, 0) + 1
    running: set[str] = set()
    begun: dict[str, int] = {}
    ended: dict[str, int] = {}
    most = 0
    most_iterations = dict.fromkeys(LOOP_CAPS, 0)
    for kind, step_id in (
        run.events.filter(type__in=("step_start", "step_end")).order_by("seq").values_list("type", "step_id")
    ):
        match = ITERATION.match(step_id)
        key = f"{match[1]}[{match[2]}]" if match else None
        if kind == "step_start":
            running.add(step_id)
            if key:
                begun[key] = begun.get(key, 0) + 1
        else:
            running.discard(step_id)
            if key:
                ended[key] = ended.get(key, 0) + 1
        most = max(most, len(running))
        for loop in LOOP_CAPS:
            under_way = [k for k in begun if k.startswith(f"{loop}[") and ended.get(k, 0) < members[k]]
            most_iterations[loop] = max(most_iterations[loop], len(under_way))
    return most, most_iterations


def assert_caps_held(run: Run) -> None:
    assert run.status == Run.Status.COMPLETED, run.error
    assert set(run.steps.exclude(kind="coordinator").values_list("status", flat=True)) == {"completed"}
    assert run.steps.filter(kind="step").count() == 8 * 2 + 8 + 4
    assert_gapless(run)
    most, most_iterations = most_at_once(run)
    # Held, and reached: the run was busy enough for its cap to bind.
    assert most == RUN_CAP
    assert all(most_iterations[loop] <= cap for loop, cap in LOOP_CAPS.items()), most_iterations
    assert all(most_iterations[loop] >= 2 for loop in LOOP_CAPS), most_iterations


def test_caps_hold_on_racing_worker_threads(celery_worker, vendor):
    run = wait_for_run(do_create_run(register("concurrency/capped"), {}), timeout=60)

    assert_caps_held(run)
