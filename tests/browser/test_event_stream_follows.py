"""The run page's event stream as a person watches it, in a real browser: it
opens at the latest events and follows the newest while scrolled to its end,
stays put when scrolled up (a button counts what arrived and jumps back);
filters are chips kept in the address; rows fit their card at 1280, 900 and
600 px; and the header says live, reconnecting or offline: killing the
server shows "reconnecting", its return "live" with the events written
meanwhile caught up, none missing or twice, and an action pressed while it
is away says it failed.

The module starts its own `manage.py serve` (so that it can kill it and start
it again on the same port and database). Runs here are made by the test, and
their events written by `manage.py shell` (another process, as a worker
would): no worker touches them, so the events are exactly the test's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.harness import (
    ROOT,
    Server,
    _ready,
    _serve,
    _server_env,
    assert_gapless,
    event_rows,
    free_port,
    log_in,
    port_open,
    release_workspaces,
)

pytestmark = pytest.mark.browser

CREATE_RUN = """
from django.contrib.auth.models import User
from django.utils import timezone
from runs.models import Run, Step, Workflow
run = Run.objects.create(
    workflow=Workflow.objects.filter(name="hub_and_spoke").latest("version"),
    created_by=User.objects.get(username="admin"), status="running", started=timezone.now(),
)
for position, step_id in enumerate(["coordinator", "first", "second"]):
    Step.objects.create(
        run=run, step_id=step_id, kind="coordinator" if position == 0 else "step",
        agent="coordinator" if position == 0 else "researcher", position=position, status="running",
    )
print(run.pk)
"""

# Writes events to run {run}: {count} rounds of the kinds named in {kinds}, {pause} s apart.
WRITE_EVENTS = """
import time
from django.db import transaction
from agents.events import Event
from runs.store.unit_of_work import UnitPerEventSink
from runs.store.sql import store
LONG = "{long}"
NOTE = "note {{i}}: the coordinator reads the results "
KINDS = {{
    "note": lambda i: Event("coordinator_narration", "", {{"text": NOTE.format(i=i) + LONG}}),
    "message": lambda i: Event("message_sent", "first", {{
        "message_id": f"m{{i}}", "from": "first", "to": "coordinator", "msg_type": "status",
        "content": f"first found {{i}} prices " + LONG,
    }}),
    "error": lambda i: Event("error", "second", {{"error": f"second failed {{i}}: " + LONG}}),
}}
for i in range({count}):
    with transaction.atomic():
        store().lock_run({run})
        sink = UnitPerEventSink({run})
        for kind in {kinds!r}:
            sink.emit(KINDS[kind](i))
    if {pause}:
        time.sleep({pause})
"""

LONG_TEXT = "deploy[7].ship/" + "x" * 180 + " and more words after it"


class Restartable(Server):
    """The module's server, which a test may kill and start again on the same port and database."""

    def start(self) -> None:
        port = int(urlsplit(self.base_url).port)
        self.starts = getattr(self, "starts", 0) + 1
        self.log_path = self.log_path.with_name(f"server-{self.starts}.log")
        self.proc = _serve(port, self.env, self.log_path)
        if not _ready(self.proc, port, self.log_path):
            pytest.fail(f"the server could not listen on port {port} again:\n{self.log()}", pytrace=False)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def server(browser, migrated_data_dir, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("zenweb-data")
    shutil.copytree(migrated_data_dir, data_dir, dirs_exist_ok=True)
    # Events written by another process are found at the page's socket's poll.
    env = _server_env(data_dir) | {"ZENWEB_LIVE_POLL_SECONDS": "0.3"}
    port = free_port()
    server = Restartable(base_url=f"http://127.0.0.1:{port}", demo_url="", log_path=data_dir / "server.log", env=env)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        release_workspaces(data_dir)


def new_run(server: Server) -> int:
    return int(server.shell(CREATE_RUN).strip())


def write_events(server: Server, run: int, count: int, kinds=("note",), pause: float = 0.0) -> None:
    server.shell(WRITE_EVENTS.format(run=run, count=count, kinds=list(kinds), pause=pause, long=LONG_TEXT))


def write_events_meanwhile(server: Server, run: int, count: int, pause: float, kinds=("note",)) -> subprocess.Popen:
    code = WRITE_EVENTS.format(run=run, count=count, kinds=list(kinds), pause=pause, long=LONG_TEXT)
    return subprocess.Popen([sys.executable, "manage.py", "shell", "-v0", "-c", code], cwd=ROOT, env=server.env)


LIST_STATE = """() => {
  const list = document.getElementById("event-list");
  const rows = list.querySelectorAll("details.event");
  const last = rows[rows.length - 1];
  const box = list.getBoundingClientRect(), row = last.getBoundingClientRect();
  return {
    scrollTop: list.scrollTop,
    atEnd: list.scrollHeight - list.scrollTop - list.clientHeight <= 2,
    lastSeq: Number(last.dataset.seq),
    lastVisible: row.top >= box.top - 1 && row.bottom <= box.bottom + 1,
  };
}"""


def list_state(page) -> dict:
    return page.evaluate(LIST_STATE)


def wait_for_seq(page, seq: int, timeout_ms: int = 10_000) -> None:
    page.wait_for_selector(f"#event-list #event-{seq}", state="attached", timeout=timeout_ms)


# -- following ------------------------------------------------------------------------------


def test_it_opens_at_the_latest_events_follows_them_and_stops_when_scrolled_up(open_page, server):
    run = new_run(server)
    write_events(server, run, 250)
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    opened = list_state(page)
    assert opened["lastSeq"] == 250 and opened["lastVisible"] and opened["atEnd"], (
        f"the run did not open at its latest event: {opened}"
    )

    # At the end, it follows: each new event is scrolled into view.
    writer = write_events_meanwhile(server, run, 6, pause=0.15)
    try:
        wait_for_seq(page, 256)
    finally:
        writer.wait(timeout=30)
    followed = list_state(page)
    assert followed["lastSeq"] == 256 and followed["lastVisible"] and followed["atEnd"], followed
    assert page.locator("#new-events").is_hidden()

    # Scrolled up, it stays where the person reads and counts what arrived.
    page.evaluate("document.getElementById('event-list').scrollTop = 300")
    page.wait_for_function("() => !window.zenwebFollow.isFollowing()")
    write_events(server, run, 4)
    wait_for_seq(page, 260)
    expect(page.locator("#new-events")).to_be_visible()
    expect(page.locator("#new-events")).to_have_text("4 new events ↓")
    stayed = list_state(page)
    assert stayed["scrollTop"] == 300 and not stayed["lastVisible"], f"the list moved under the reader: {stayed}"

    page.click("#new-events")

    back = list_state(page)
    assert back["lastSeq"] == 260 and back["lastVisible"] and back["atEnd"], back
    assert page.locator("#new-events").is_hidden()
    seqs = [row["seq"] for row in event_rows(page)]
    assert seqs == sorted(set(seqs)) and seqs[-1] == 260, seqs[-12:]


# -- filters --------------------------------------------------------------------------------


def test_filter_chips_narrow_the_list_live_and_survive_a_reload(open_page, server):
    run = new_run(server)
    write_events(server, run, 3, kinds=("note", "message", "error"))
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    assert len(event_rows(page)) == 9

    with page.expect_response(lambda r: "/events/" in r.url):
        page.click("#event-filters label.chip:has(input[name=severity][value=error])")
    expect(page.locator("#event-list details.event")).to_have_count(3)
    errors = page.locator("#event-list details.event").evaluate_all("els => els.map(e => e.dataset.severity)")
    assert errors == ["error"] * 3
    assert parse_qs(urlsplit(page.url).query) == {"severity": ["error"]}

    page.reload()
    assert page.locator("#event-filters input[name=severity][value=error]").is_checked()
    assert [row["type"] for row in event_rows(page)] == ["error"] * 3
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    # A step from the list becomes a chip, also kept in the address.
    with page.expect_response(lambda r: "/events/" in r.url):
        page.select_option("#event-filters select.step-pick", "second")
    expect(page.locator("#event-filters .chip-step input[value=second]")).to_be_checked()
    expect(page.locator("#event-list details.event")).to_have_count(3)
    assert parse_qs(urlsplit(page.url).query) == {"step": ["second"], "severity": ["error"]}

    # Live events the filters let through are added; the others are not.
    write_events(server, run, 1, kinds=("note", "message", "error"))
    wait_for_seq(page, 12)
    rows = event_rows(page)
    assert [row["type"] for row in rows] == ["error"] * 4 and rows[-1]["seq"] == 12, rows
    assert page.locator("#last-seq").get_attribute("data-seq") == "12"


def test_live_events_that_arrive_while_a_filter_loads_are_kept(open_page, server):
    run = new_run(server)
    write_events(server, run, 3, kinds=("note", "error"))
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    # The filtered page is read at once but reaches the page only seconds
    # later, while events are written and arrive live.
    held = 4.0

    def late(route):
        response = route.fetch()
        time.sleep(held)
        route.fulfill(response=response)

    page.route("**/events/?*", late)
    writer = write_events_meanwhile(server, run, 4, pause=0.3, kinds=("note", "error"))
    try:
        with page.expect_response(lambda r: "/events/" in r.url, timeout=15_000):
            page.click("#event-filters label.chip:has(input[name=severity][value=error])")
    finally:
        writer.wait(timeout=30)
    wait_for_seq(page, 14)

    rows = event_rows(page)
    assert [row["seq"] for row in rows] == [2, 4, 6, 8, 10, 12, 14], rows


# -- layout ---------------------------------------------------------------------------------

ROW_BOXES = """() => {
  const list = document.getElementById("event-list");
  const edge = list.getBoundingClientRect().right;
  const wide = [];
  for (const row of list.querySelectorAll("details.event")) {
    for (const el of [row, ...row.querySelectorAll("summary, summary > *")]) {
      const parent = el.parentElement.getBoundingClientRect();
      const box = el.getBoundingClientRect();
      if (box.right > parent.right + 1 || box.right > edge + 1) {
        const limit = Math.round(Math.min(parent.right, edge));
        const name = `${el.tagName.toLowerCase()}.${el.className}`;
        wide.push(`#${row.dataset.seq} ${name}: ${Math.round(box.right)} > ${limit}`);
      }
    }
  }
  const what = list.querySelector("details.event .ewhat").getBoundingClientRect().width;
  return {wide, what, listScrolls: list.scrollWidth > list.clientWidth + 1,
          pageWidth: document.documentElement.scrollWidth};
}"""


@pytest.mark.parametrize("width", [1280, 900, 600])
def test_event_rows_fit_their_card_and_say_what_happened_in_words(open_page, server, width):
    run = new_run(server)
    write_events(server, run, 2, kinds=("note", "message", "error"))
    page = open_page(viewport={"width": width, "height": 900})
    log_in(page, server, next_path=f"/runs/{run}/")

    boxes = page.evaluate(ROW_BOXES)

    assert not boxes["wide"], f"event rows wider than their container at {width}px: {boxes['wide'][:5]}"
    assert not boxes["listScrolls"], f"the event list scrolls sideways at {width}px"
    assert boxes["pageWidth"] <= width, f"the page is {boxes['pageWidth']}px wide at {width}px"
    # The words get the row's whole width, not a 109 px column.
    assert boxes["what"] >= min(width * 0.35, 400), f"'what' is {boxes['what']}px at {width}px"
    message = page.locator("#event-list details.type-message_sent").first
    assert "first → coordinator (status): first found 0 prices" in message.locator(".ewhat").inner_text()
    message.locator("summary").click()
    assert LONG_TEXT in message.locator(".event-full").inner_text(), "the whole text is not shown on expand"


# -- connection -----------------------------------------------------------------------------


def test_the_header_says_reconnecting_then_live_with_every_event_caught_up_once(open_page, server):
    run = new_run(server)
    write_events(server, run, 20)
    page = open_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    log_in(page, server, next_path=f"/runs/{run}/")
    connection = page.locator("#connection")
    expect(connection).to_have_attribute("data-state", "live")

    server.kill()
    page.wait_for_selector("#connection[data-state=reconnecting]", timeout=2_000)
    expect(connection).to_contain_text("attempt")
    expect(connection).to_contain_text("next try in")
    marked = page.evaluate("getComputedStyle(document.getElementById('run-status'), '::after').content")
    assert marked == '" (last known)"', f"the status is not marked as the last known one: {marked}"

    # Written while the server is away: the page must get them after it returns.
    write_events(server, run, 7)
    server.start()
    assert port_open(int(urlsplit(server.base_url).port))
    returned = time.monotonic()
    page.wait_for_selector("#connection[data-state=live]", timeout=2_000)
    assert time.monotonic() - returned <= 2.5

    expect(connection).to_contain_text("caught up", timeout=5_000)
    rows = event_rows(page)
    assert_gapless(rows)
    assert rows[-1]["seq"] >= 27
    # The 7 written while it was away, and whatever the restarted server's
    # recovery added to the run before the page came back.
    caught_up = int(connection.inner_text().removeprefix("live, caught up ").removesuffix(" events"))
    assert 7 <= caught_up <= rows[-1]["seq"] - 20, connection.inner_text()
    assert not [line for line in console if "[object Event]" in line], console


def test_an_action_pressed_while_the_server_is_away_says_it_failed(open_page, server):
    run = new_run(server)
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    server.kill()
    try:
        page.wait_for_selector("#connection[data-state=reconnecting]", timeout=2_000)
        page.once("dialog", lambda dialog: dialog.accept())  # Cancel asks first
        page.click("#run-header button.danger")
        notice = page.locator("#action-notices .action-failed")
        expect(notice).to_contain_text("“Cancel run” failed: the server could not be reached")
    finally:
        server.start()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live", timeout=5_000)
    # Nothing was cancelled (the restarted server may have taken the run's steps up again).
    assert page.locator("#run-status").get_attribute("data-status") != "cancelled"


def test_the_header_says_offline_without_network_and_reconnects_when_it_returns(open_page, server):
    run = new_run(server)
    page = open_page()
    log_in(page, server, next_path=f"/runs/{run}/")
    connection = page.locator("#connection")
    expect(connection).to_have_attribute("data-state", "live")

    page.context.set_offline(True)
    expect(connection).to_have_attribute("data-state", "offline", timeout=2_000)
    expect(connection).to_contain_text("offline")
    page.context.set_offline(False)

    expect(connection).to_have_attribute("data-state", "live", timeout=2_000)
