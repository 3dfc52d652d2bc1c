"""The active-run limit under a burst of 50 commands, on PostgreSQL: the
lock on the person's row (SELECT ... FOR UPDATE) admits exactly 20."""

from __future__ import annotations

import pytest

from tests.integration import test_run_limit_under_race as on_sqlite

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

test_a_burst_of_commands_starts_exactly_the_limit_on_postgresql = (
    on_sqlite.test_a_burst_of_commands_starts_exactly_the_limit
)
