"""The edges of a served zenweb (daphne in front of Django, as deployed): a
bad multipart body, an unknown websocket path, and the close a page
reconnects after when a service failed under its socket."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from tests.browser.harness import SOCKET_SPY, log_in

pytestmark = pytest.mark.browser

MAKE_TOKEN = """
from django.contrib.auth.models import User
from runs.api.auth import create_token
print(create_token(User.objects.get(username="admin"))[1])
"""


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def test_it_answers_a_bad_multipart_body_with_token_auth_in_json(server):
    key = server.shell(MAKE_TOKEN).strip().splitlines()[-1]

    for content_type in ("multipart/form-data", "multipart/form-data; boundary=zz"):
        status, sent_type, body = post(
            f"{server.base_url}/api/commands",
            b"not a form",
            {"Authorization": f"Token {key}", "Content-Type": content_type},
        )

        assert (status, sent_type) == (400, "application/json"), body
        assert json.loads(body) == {"error": "invalid JSON: the body is multipart/form-data, send application/json"}


CLOSE_CODE = """url => new Promise(resolve => {
  const socket = new WebSocket(url);
  socket.onclose = e => resolve(e.code);
})"""


def test_it_closes_an_unknown_websocket_path_with_404_and_no_traceback(open_page, server):
    page = open_page()
    log_in(page, server)

    code = page.evaluate(CLOSE_CODE, server.base_url.replace("http", "ws") + "/ws/nothing-here/")

    assert code == 4404
    assert "Traceback" not in server.log()


def test_it_reconnects_after_the_server_says_try_again(open_page, server):
    page = open_page(init_script=SOCKET_SPY)
    log_in(page, server)
    page.goto(server.demo_url)
    sockets = "window.__zenwebSockets"
    page.wait_for_function(f"() => {sockets}.length === 1 && {sockets}[0].openedAt !== null")
    page.evaluate("htmx.config.wsReconnectDelay = () => 100")

    # The close event of a socket the server ended with 4503, as after a
    # failed database read or a Redis error (runs/consumers.py,
    # zenweb/websockets.py). A page cannot make daphne send it: daphne
    # answers a client's close with 1000.
    page.evaluate(f"{sockets}[0].socket.dispatchEvent(new CloseEvent('close', {{code: 4503}}))")

    page.wait_for_function(f"() => {sockets}.length === 2 && {sockets}[1].openedAt !== null")
    assert "after=" in page.evaluate(f"{sockets}[1].url")
