"""The coordinator's review loop on PostgreSQL and Redis, with a separate
worker process: a fix-up spawned as it finishes runs before the run ends."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_a_fix_up_spawned_as_the_coordinator_finishes_runs_on_the_services(worker_process):
    run = wait_for_run(do_create_run(register("tools/fixup"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED
    statuses = dict(run.steps.filter(kind=Step.Kind.STEP).values_list("step_id", "status"))
    assert statuses == {"worker-1": Step.Status.COMPLETED, "worker-2": Step.Status.COMPLETED}
    assert "worker-1: worker-1 done" in run.result and "worker-2: worker-2 done" in run.result
    assert_gapless(run)
