"""What every browser test uses: Debian's chromium, one `manage.py serve`
per test module (embedded: SQLite in a temporary directory, in-process
worker, the demo runs), fresh pages, and helpers that read the run page.

Besides the admin, the server has two people: ``approver`` (in the
approvers group, which may decide approvals) and ``viewer`` (may not).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents import workspace_quota

# (title, text producer) pairs a test's fixtures register for its failure report.
REPORT_SECTIONS = pytest.StashKey[list[tuple[str, Callable[[], str]]]]()


def add_report_section(item: pytest.Item, title: str, produce: Callable[[], str]) -> None:
    item.stash.setdefault(REPORT_SECTIONS, []).append((title, produce))


ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ADMIN_PASSWORD = "browser-test-password"
PEOPLE_PASSWORD = "people-test-password"
CREATE_PEOPLE = f"""
from django.contrib.auth.models import Group, Permission, User
group, _ = Group.objects.get_or_create(name="approvers")
group.permissions.add(Permission.objects.get(codename="decide_approval"))
User.objects.create_user("approver", password="{PEOPLE_PASSWORD}").groups.add(group)
User.objects.create_user("viewer", password="{PEOPLE_PASSWORD}")
"""
# Screenshots the browser tests take, referenced from docs/dashboard.md.
SCREENSHOTS = ROOT / "test-output" / "screenshots"
STARTUP_TIMEOUT = 30.0
RUN_TIMEOUT_MS = 30_000
DEMO_URL = re.compile(r"demo run: (http://\S+/runs/(\d+)/)")
# What `manage.py serve` prints once daphne listens, and when it cannot
# (the port taken: zenweb/management/commands/serve.py).
LISTENING = "listening on http://127.0.0.1:{port}/"
CANNOT_SERVE = "cannot serve on"

# Keeps every WebSocket the page opens (with what each one delivered) and
# offers __zenwebDropSocket(): the socket goes away the way a network drop
# looks to the page (close code 1006), the only kind of close (with 1011-1013)
# the htmx ws extension reconnects after. A plain socket.close() from script
# reports 1005 and the extension would, rightly, stay disconnected.
SOCKET_SPY = """
(() => {
  const Native = window.WebSocket;
  const sockets = (window.__zenwebSockets = []);
  const seqsIn = (html) => {
    const doc = new DOMParser().parseFromString(html, "text/html");
    return Array.from(doc.querySelectorAll("details.event"), (e) => Number(e.dataset.seq));
  };
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      const record = { url: String(args[0]), openedAt: null, messages: [] };
      sockets.push(record);
      Object.defineProperty(record, "socket", { value: this, enumerable: false });
      this.addEventListener("open", () => (record.openedAt = performance.now()));
      this.addEventListener("message", (e) =>
        record.messages.push({ at: performance.now(), seqs: seqsIn(e.data) })
      );
    }
  };
  window.__zenwebDropSocket = (reconnectAfterMs) => {
    htmx.config.wsReconnectDelay = () => reconnectAfterMs;
    const socket = sockets[sockets.length - 1].socket;
    const handler = socket.onclose;  // the htmx ws extension's
    socket.onclose = null;
    socket.close();  // the server side really goes away too
    handler.call(socket, new CloseEvent("close", { code: 1006, wasClean: false }));
    return Number(document.getElementById("last-seq").dataset.seq);
  };
})();
"""

EVENT_ROWS = """els => els.map(e => ({
  seq: Number(e.dataset.seq),
  type: e.querySelector(".etype").textContent.trim(),
}))"""


# -- fixtures ------------------------------------------------------------------------------


def require_chromium() -> None:
    if Path(CHROMIUM).exists():
        return
    message = f"{CHROMIUM} not found: the browser tests need Debian's chromium package (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; on CI (CI=true) they must run, not be skipped", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Server:
    base_url: str
    demo_url: str
    log_path: Path
    env: dict[str, str]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def shell(self, code: str) -> str:
        """Run ``code`` with `manage.py shell` on the server's database (as
        another process would write to it); return what it printed."""
        return manage(self.env, "shell", "-v0", "-c", code)


def manage(env: dict[str, str], *args: str) -> str:
    """`manage.py <args>` with ``env``; its output, or the test fails with it."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode:
        pytest.fail(f"manage.py {args[0]} failed:\n{done.stdout}{done.stderr}", pytrace=False)
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _server_env(data_dir: Path) -> dict[str, str]:
    # DEBUG at its default, off, as `make run` serves: static files, htmx included, must load without it.
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG")}
    return env | {
        "ZENWEB_DATA_DIR": str(data_dir),
        "ZENWEB_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PYTHONUNBUFFERED": "1",
        # Runs of more than two steps count as big: their live updates mark
        # the graph stale and the page fetches it (test_live_graph.py).
        "ZENWEB_LIVE_GRAPH_STEPS": "2",
    }


@pytest.fixture(scope="session")
def migrated_data_dir(tmp_path_factory) -> Path:
    """A data directory whose SQLite database is migrated and holds the
    approver and the viewer: made once (about 12 s), copied for each
    module's server."""
    data_dir = tmp_path_factory.mktemp("zenweb-data-migrated")
    env = _server_env(data_dir)
    manage(env, "migrate", "--noinput", "-v0")
    manage(env, "shell", "-c", CREATE_PEOPLE)
    return data_dir


@pytest.fixture(scope="module")
def server(browser, migrated_data_dir, tmp_path_factory, request):
    """`manage.py serve` on a free port with its own SQLite database (a copy
    of ``migrated_data_dir``'s). Depends on `browser` so chromium is up
    before the server starts the demo run, which only lasts a few seconds,
    and so a missing chromium skips (or fails) before any server starts. A
    module's ``server_env`` fixture, if it has one, adds to the server's
    environment."""
    try:
        # First: a module's fixture may start servers of its own (a fake
        # model endpoint), which must not take the port chosen below.
        extra = request.getfixturevalue("server_env")
    except pytest.FixtureLookupError:
        extra = {}
    for _attempt in range(3):
        data_dir = tmp_path_factory.mktemp("zenweb-data")
        shutil.copytree(migrated_data_dir, data_dir, dirs_exist_ok=True)
        log_path = data_dir / "server.log"
        env = _server_env(data_dir) | extra
        port = free_port()
        proc = _serve(port, env, log_path)
        if _ready(proc, port, log_path):
            break
        # Another process took the port between free_port() and the bind:
        # again, on another port and a database its demo runs never touched.
    else:
        pytest.fail(f"manage.py serve found no free port:\n{log_path.read_text(errors='replace')}", pytrace=False)
    try:
        demo = DEMO_URL.search(log_path.read_text(errors="replace"))
        yield Server(base_url=f"http://127.0.0.1:{port}", demo_url=demo.group(1), log_path=log_path, env=env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        release_workspaces(data_dir)


def release_workspaces(data_dir: Path) -> None:
    """Unmount the workspace file systems a stopped server left mounted
    (a run still under way when it stopped; the next server's sweep would
    do it, but no server comes after a test's), so no mount outlives its test."""
    for root in workspace_quota.mounted_in(data_dir / "workspaces"):
        workspace_quota.remove(root)


def _serve(port: int, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def _ready(proc: subprocess.Popen, port: int, log_path: Path) -> bool:
    """Wait until the server started its demo run and listens on ``port``:
    True; False if it could not listen there (the port was taken). Fails
    the test if it exits otherwise or takes too long."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        text = log_path.read_text(errors="replace")
        if DEMO_URL.search(text) and LISTENING.format(port=port) in text:
            return True
        if proc.poll() is not None:
            if CANNOT_SERVE in text:
                return False
            pytest.fail(f"manage.py serve exited with {proc.returncode}:\n{text}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"manage.py serve not ready after {STARTUP_TIMEOUT}s:\n{text}", pytrace=False)
        time.sleep(0.05)


@pytest.fixture
def open_page(browser, server, request):
    """open_page(viewport=..., init_script=...) -> a page in a fresh browser
    context. A failing test's report gets the server output and each page's
    console messages and uncaught errors."""
    contexts = []
    console: list[str] = []
    add_report_section(request.node, "zenweb server output", server.log)
    add_report_section(request.node, "browser console", lambda: "\n".join(console))

    def open_page(*, viewport: dict | None = None, init_script: str | None = None):
        context = browser.new_context(viewport=viewport or {"width": 1280, "height": 800})
        contexts.append(context)
        context.set_default_timeout(10_000)
        if init_script:
            context.add_init_script(init_script)
        page = context.new_page()
        page.on("console", lambda m: console.append(f"[{m.type}] {m.text}"))
        page.on("pageerror", lambda e: console.append(f"[pageerror] {e}"))
        return page

    yield open_page
    for context in contexts:
        context.close()


# -- helpers -------------------------------------------------------------------------------


def log_in(page, server: Server, next_path: str = "/", user: str = "admin") -> None:
    page.goto(f"{server.base_url}/login/?next={next_path}")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", ADMIN_PASSWORD if user == "admin" else PEOPLE_PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{server.base_url}{next_path}")


def start_run_from_list(page, server: Server, workflow: str = "hub_and_spoke") -> None:
    """Start a run with the form on the runs list; leaves `page` on its run page."""
    page.goto(f"{server.base_url}/")
    select = page.locator("form.start-form select[name=workflow]")
    label = next(text.strip() for text in select.locator("option").all_inner_texts() if text.startswith(workflow))
    select.select_option(label=label)
    # A destructive workflow starts only with the tick beside what it will do.
    tick = page.locator("form.start-form fieldset.destructive-confirm:not([hidden]) input[name=confirm]")
    if tick.count():
        tick.check()
    page.click("form.start-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/runs/\d+/$"))


def status(page) -> str:
    return page.locator("#run-status").get_attribute("data-status")


def event_rows(page) -> list[dict]:
    return page.locator("#event-list details.event").evaluate_all(EVENT_ROWS)


def wait_until_finished(page, expected: str = "completed", timeout_ms: int = RUN_TIMEOUT_MS) -> list[dict]:
    """Wait for the run to reach ``expected`` on the page and for the event
    list to end with workflow_end, then return the event rows."""
    page.wait_for_selector(f"#run-status[data-status={expected}]", timeout=timeout_ms)
    # The header and the rows travel in one message, but the header may be a
    # newer read than the rows: workflow_end can follow a moment later.
    page.wait_for_function(
        """() => {
          const rows = document.querySelectorAll("#event-list details.event .etype");
          return rows.length && rows[rows.length - 1].textContent.trim() === "workflow_end";
        }""",
        timeout=5_000,
    )
    return event_rows(page)


def assert_gapless(rows: list[dict]) -> None:
    seqs = [row["seq"] for row in rows]
    duplicates = sorted({s for s in seqs if seqs.count(s) > 1})
    assert not duplicates, f"events shown more than once: {duplicates}; seqs on the page: {seqs}"
    assert seqs == list(range(1, len(seqs) + 1)), f"seqs on the page are not 1..{len(seqs)} in order: {seqs}"


def assert_in_order(rows: list[dict], types: list[str]) -> None:
    shown = [row["type"] for row in rows]
    position = 0
    for wanted in types:
        try:
            position = shown.index(wanted, position) + 1
        except ValueError:
            raise AssertionError(f"{wanted} not found after position {position} in {shown}") from None


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as test-output/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def step_status(page, step_id: str) -> str:
    return page.locator(f"#step-list #step-{step_id} .status").get_attribute("data-status")


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def overflowing(page, width: int) -> list[str]:
    """The outermost elements that stick out past ``width``, for the message."""
    return page.evaluate(
        """width => Array.from(document.querySelectorAll("body *"))
          .filter(e => e.getBoundingClientRect().right > width + 2)
          .filter(e => !(e.parentElement.getBoundingClientRect().right > width + 2))
          .map(e => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${e.className ? "." + e.className : ""}`
            + ` (${Math.round(e.getBoundingClientRect().right)}px)`)""",
        width,
    )
