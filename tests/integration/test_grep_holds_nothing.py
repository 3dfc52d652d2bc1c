"""Issue 45's attack: a model's grep pattern that backtracks exponentially
((A|A)*B over 27 A's held the GIL 15.8 s under Python's re, and every other
request of the process waited). The run's worker is a thread of this
process, as in the embedded layout, so a pattern that held the GIL would
stall the login page too."""

from __future__ import annotations

import time

import pytest

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

# The issue asks for another request answered in under 1 s; the bound is
# looser for a loaded 2-core machine, and still far under the stall of a
# backtracking grep (15 s for this line, doubling with each A more).
LONGEST_WAIT = 3.0


def test_an_exponential_grep_pattern_leaves_other_requests_answered(celery_worker, client):
    client.get("/login/")  # the first request loads the templates: not what is measured
    run = do_create_run(register("tools/redos_grep"), {})
    moments = [time.monotonic()]
    answered = 0
    deadline = moments[0] + 120
    while moments[-1] < deadline:
        assert client.get("/login/").status_code == 200
        answered += 1
        moments.append(time.monotonic())
        run.refresh_from_db()
        if run.is_terminal:
            break

    assert run.status == Run.Status.COMPLETED, run.error
    call = run.tool_calls.get(name="grep")
    assert call.status == "done", call.result
    assert "haystack.txt:2: " in call.result and "haystack.txt:1: " not in call.result
    # No request waited on the grep: the longest time between two answers
    # (a stalled process shows as one long gap wherever the stall fell).
    gaps = [later - earlier for earlier, later in zip(moments, moments[1:], strict=False)]
    assert answered >= 1
    assert max(gaps) < LONGEST_WAIT, f"a request waited {max(gaps):.1f}s"
