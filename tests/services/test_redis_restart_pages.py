"""Run pages in chromium, served by a real daphne whose channel layer is a
redis-server of the test's own, while that Redis restarts without its data
mid-run (the notifications sent meanwhile and the broker's queued tasks
lost): the run completes and each page gets the events it missed, from its
cursor, none missing and none twice."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.utils import timezone

from runs.actions import do_create_run
from runs.models import Run, ToolExecution
from tests.browser.harness import SOCKET_SPY, assert_gapless, browser, event_rows  # noqa: F401
from tests.conftest import register, wait_for_run
from tests.services.conftest import worker_env, workers
from tests.services.test_dashboard_faults import daphne, queries_beside_playwright  # noqa: F401 - fixtures

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PAGES = 3


def test_pages_get_every_event_they_missed_across_a_redis_restart(
    tmp_path,
    own_redis,
    daphne,  # noqa: F811 - the fixture imported above
    browser,  # noqa: F811 - the harness fixture
    owner,
):
    base, log = daphne
    session = Client()
    session.force_login(owner)
    contexts = []
    try:
        with workers(tmp_path, "pages", env=worker_env(tmp_path, own_redis.url)):
            run = do_create_run(register("durability/slow_middle"), {}, user=owner)
            pages = []
            for _ in range(PAGES):
                context = browser.new_context()
                contexts.append(context)
                context.add_cookies([{"name": "sessionid", "value": session.cookies["sessionid"].value, "url": base}])
                context.add_init_script(SOCKET_SPY)
                page = context.new_page()
                page.goto(f"{base}/runs/{run.pk}/")
                page.wait_for_function("() => window.__zenwebSockets.length && window.__zenwebSockets[0].openedAt")
                pages.append(page)
            running = ToolExecution.objects.filter(step__run=run, step__step_id="two", status="running")
            deadline = time.monotonic() + 30
            while not running.exists():
                assert time.monotonic() < deadline, "step two's command never started"
                time.sleep(0.05)

            down = timezone.now()
            own_redis.stop()
            time.sleep(5)  # step two's command (4 s) ends meanwhile: its events find no Redis
            own_redis.start()
            up = timezone.now()
            run = wait_for_run(run, timeout=60)

        assert run.status == Run.Status.COMPLETED, run.error
        # Written while Redis was away: no notification of them reached the pages.
        assert run.events.filter(created__range=(down, up)).exists(), "no event was written while Redis was away"
        last = run.last_event_seq
        for page in pages:
            # Well within the daphne's 30 s poll: the notifications after the
            # restart bring the page up to date, missed events included.
            page.wait_for_function(
                f"() => Number(document.getElementById('last-seq').dataset.seq) >= {last}", timeout=10_000
            )
            rows = event_rows(page)
            assert_gapless(rows)
            assert rows[-1]["type"] == "workflow_end" and rows[-1]["seq"] == last, log.read_text()[-3000:]
    finally:
        for context in contexts:
            context.close()
