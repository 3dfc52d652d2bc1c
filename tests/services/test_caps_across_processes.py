"""maxConcurrency holds while two worker processes race on PostgreSQL
(tests/integration/test_caps_under_race.py says how it is measured)."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from tests.conftest import register, wait_for_run
from tests.integration.test_caps_under_race import assert_caps_held
from tests.services.conftest import workers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_caps_hold_on_racing_worker_processes(tmp_path):
    # Two processes of four children each: eight slots for a cap of four.
    with workers(tmp_path, "caps-a", "caps-b"):
        run = wait_for_run(do_create_run(register("concurrency/capped"), {}), timeout=60)

    assert_caps_held(run)
