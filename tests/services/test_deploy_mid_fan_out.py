"""A deploy in the middle of a wide fan-out: the worker told to stop (SIGTERM,
Celery's warm shutdown) finishes the turn it is on and leaves the rest
queued in the run, leased to no one, and the worker that replaces it takes
them: every turn once, nothing lost, no event missing."""

from __future__ import annotations

import time

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import assert_gapless, wait_for_run
from tests.integration.test_queued_turns import register_text, wide
from tests.services.conftest import workers
from zenweb.celery import app

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

ITEMS = 16


def _completed(run: Run) -> int:
    return run.steps.filter(kind="step", status=Step.Status.COMPLETED).count()


@pytest.fixture
def broker():
    """The broker purged before and after the test, not between its workers:
    the tasks the stopped worker queued or gave back must stay for the next."""
    app.control.purge()
    yield
    app.control.purge()


def test_a_worker_stopped_mid_fan_out_leaves_the_turns_it_did_not_take_to_the_next(tmp_path, broker):
    workflow = register_text(wide(ITEMS, delay=0.3))
    # One process with one child: the turns it takes, it takes one at a time
    # (0.3 s each), so the fan-out would take it about 5 s.
    # The sweeper waits long enough here that only the broker's tasks can
    # finish the run in time: the ones the stopped worker queued or gave back.
    env = {"ZENWEB_REQUEUE_AFTER": "600"}
    with workers(tmp_path, "deploy-old", env=env, purge=False, concurrency=1) as logs:
        run = do_create_run(workflow, {})
        deadline = time.monotonic() + 60
        while _completed(run) < 1:
            assert time.monotonic() < deadline, logs[0].read_text()
            time.sleep(0.05)
        old = workers.processes[0]
        old.terminate()  # what a deploy does: Celery's warm shutdown
        old.wait(timeout=30)
    assert "Warm shutdown" in logs[0].read_text()

    left = run.steps.filter(kind="step").exclude(status=Step.Status.COMPLETED)
    # It stopped after the turn it was on (and at most one task's time past
    # it), not after the whole fan-out; what it did not take waits queued,
    # held by no lease, no turn taken half-way.
    assert left.count() >= ITEMS // 2, f"{ITEMS - left.count()} of {ITEMS} done before it stopped"
    assert not left.exclude(status=Step.Status.RUNNING, turns=0, turn_queued__isnull=False).exists()
    assert not left.exclude(lease_owner="").exists()

    with workers(tmp_path, "deploy-new", env=env, purge=False):
        run = wait_for_run(run, timeout=60)

    assert run.status == Run.Status.COMPLETED
    steps = run.steps.filter(kind="step")
    assert steps.count() == ITEMS and not steps.exclude(turns=1).exists()
    ends = sorted(run.events.filter(type="step_end").exclude(step_id="coordinator").values_list("step_id", flat=True))
    assert ends == sorted(steps.values_list("step_id", flat=True))
    assert_gapless(run)
