"""A run page in chromium, served by a real daphne (on the test database and
a redis-server of the test's own), while daphne's database connections are
killed mid-run: the page shows every event, once (reconnecting where a
read failed)."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test import Client

from runs.actions import do_create_run
from runs.models import Run
from tests.browser.harness import SOCKET_SPY, assert_gapless, browser, event_rows, free_port, port_open  # noqa: F401
from tests.conftest import register, wait_for_run
from tests.services import conftest as services
from tests.services.conftest import workers
from tests.services.test_faults import terminate_other_connections

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module", autouse=True)
def queries_beside_playwright():
    # Playwright's sync API keeps an event loop in this thread while the
    # module's browser lives: Django would take the test's own queries (and
    # the database flush after it) for queries from async code.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture
def daphne(own_redis, tmp_path):
    db = connection.settings_dict
    log = tmp_path / "daphne.log"
    with services.daphne(
        log,
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        REDIS_URL=own_redis.url,
        ZENWEB_LIVE_POLL_SECONDS="30",  # only the notifications and the reconnect may bring events
    ) as base:
        yield base, log


def test_pages_reconnect_and_show_every_event_when_daphnes_database_connection_is_killed(
    tmp_path,
    own_redis,
    daphne,
    browser,  # noqa: F811 - the harness fixture
    owner,
):
    base, log = daphne
    session = Client()
    session.force_login(owner)
    env = {"REDIS_URL": own_redis.url, "ZENWEB_WORKSPACES": str(tmp_path / "workspaces"), "ZENWEB_SWEEP_SECONDS": "1"}
    context = browser.new_context()
    context.add_cookies([{"name": "sessionid", "value": session.cookies["sessionid"].value, "url": base}])
    context.add_init_script(SOCKET_SPY)
    page = context.new_page()
    try:
        with workers(tmp_path, "dashboard", env=env):
            run = do_create_run(register("durability/slow_chain"), {}, user=owner)
            page.goto(f"{base}/runs/{run.pk}/")
            page.wait_for_function("() => window.__zenwebSockets.length === 1 && window.__zenwebSockets[0].openedAt")
            started = run.events.filter(type="step_start", step_id="two")
            deadline = time.monotonic() + 30
            while not started.exists():
                assert time.monotonic() < deadline, "step two never started"
                time.sleep(0.05)

            assert terminate_other_connections(), "no connection was there to kill"
            run = wait_for_run(run, timeout=60)

        assert run.status == Run.Status.COMPLETED, run.error
        last = run.last_event_seq
        page.wait_for_function(
            f"() => Number(document.getElementById('last-seq').dataset.seq) >= {last}", timeout=30_000
        )
        rows = event_rows(page)
        assert_gapless(rows)
        assert rows[-1]["type"] == "workflow_end" and rows[-1]["seq"] == last
        # A socket whose database read failed was closed (4503) and the page
        # opened another; daphne's pool checks each connection it hands out,
        # so a connection killed while it idled is replaced before any read
        # fails, and then no socket closes. Either way: one open socket more
        # than the server closed.
        closed = log.read_text().count("WSDISCONNECT /ws/runs/")
        assert page.evaluate("window.__zenwebSockets.length") == 1 + closed, log.read_text()[-3000:]
        assert "invalid close code" not in log.read_text()
    finally:
        context.close()
