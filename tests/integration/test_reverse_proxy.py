"""deploy/nginx.conf as it is written (its ports and certificate swapped for
the test's own) in front of a real daphne: plain HTTP is sent to HTTPS, a page
comes through TLS with the client's address passed on, and a websocket
upgrades through it. Needs Debian's nginx (`apt-get install nginx-light`;
.ci/run installs it): skipped without it, except under CI=true."""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)

if NGINX is None and os.environ.get("CI") == "true":
    pytest.fail("the reverse-proxy test needs nginx (apt-get install nginx-light)", pytrace=False)
pytestmark = pytest.mark.skipif(NGINX is None, reason="needs nginx (apt-get install nginx-light)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


@pytest.fixture
def proxied(tmp_path):
    """(the HTTP port, the HTTPS port) of nginx in front of daphne."""
    daphne_port, http_port, https_port = free_port(), free_port(), free_port()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    site = (ROOT / "deploy" / "nginx.conf").read_text()
    for written, ours in (
        ("server 127.0.0.1:8000;", f"server 127.0.0.1:{daphne_port};"),
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("/etc/letsencrypt/live/zenweb.example.com/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/zenweb.example.com/privkey.pem", str(key)),
    ):
        assert site.count(written) == 1, written
        site = site.replace(written, ours)
    (tmp_path / "zenweb.conf").write_text(site)
    temp = {name: tmp_path / name for name in ("client", "proxy", "fastcgi", "uwsgi", "scgi")}
    (tmp_path / "nginx.conf").write_text(
        f"""
        daemon off;
        {"user root;" if os.geteuid() == 0 else ""}
        pid {tmp_path}/nginx.pid;
        error_log {tmp_path}/nginx-error.log;
        events {{}}
        http {{
            access_log off;
            {" ".join(f"{name}_temp_path {path};" for name, path in temp.items()).replace("client_", "client_body_")}
            include {tmp_path}/zenweb.conf;
        }}
        """
    )
    daphne_log, nginx_log = tmp_path / "daphne.log", tmp_path / "nginx.log"
    env = {**os.environ, "ZENWEB_DATA_DIR": str(tmp_path / "data"), "DJANGO_ALLOWED_HOSTS": "zenweb.example.com"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    bin_dir = Path(sys.executable).parent
    with daphne_log.open("wb") as out:
        daphne = subprocess.Popen(
            [
                bin_dir / "daphne",
                "--proxy-headers",
                "-b",
                "127.0.0.1",
                "-p",
                str(daphne_port),
                "zenweb.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    with nginx_log.open("wb") as out:
        nginx = subprocess.Popen(
            [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(daphne_port, daphne, daphne_log)
        wait_for_port(https_port, nginx, nginx_log)
        yield http_port, https_port, daphne_log
    finally:
        nginx.terminate()
        daphne.terminate()
        nginx.wait(timeout=10)
        daphne.wait(timeout=10)


def exchange(port: int, request: bytes, *, tls: bool) -> tuple[socket.socket, bytes]:
    """The open connection and the response head to ``request``."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        raw = context.wrap_socket(raw, server_hostname="zenweb.example.com")
    raw.sendall(request)
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(4096)
        assert chunk, head
        head += chunk
    return raw, head


def test_nginx_redirects_to_https_and_serves_a_page_through_tls(proxied):
    http_port, https_port, daphne_log = proxied
    _, head = exchange(http_port, b"GET /login/ HTTP/1.1\r\nHost: zenweb.example.com\r\n\r\n", tls=False)
    assert head.startswith(b"HTTP/1.1 301") and b"Location: https://zenweb.example.com/login/" in head

    request = (
        b"GET /healthz HTTP/1.1\r\nHost: zenweb.example.com\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: close\r\n\r\n"
    )
    connection, head = exchange(https_port, request, tls=True)
    connection.close()
    assert head.startswith(b"HTTP/1.1 200"), head
    # The client's own address reached daphne, not the one it claimed.
    deadline = time.monotonic() + 10
    while "GET /healthz" not in daphne_log.read_text():
        assert time.monotonic() < deadline, daphne_log.read_text()
        time.sleep(0.1)
    line = next(line for line in daphne_log.read_text().splitlines() if "GET /healthz" in line)
    assert line.startswith("127.0.0.1:") and "6.6.6.6" not in line


def test_a_websocket_upgrades_through_nginx(proxied):
    _, https_port, _ = proxied
    key = base64.b64encode(secrets.token_bytes(16))
    request = (
        b"GET /ws/no-such-socket/ HTTP/1.1\r\nHost: zenweb.example.com\r\nOrigin: https://zenweb.example.com\r\n"
        b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
        + key
        + b"\r\n\r\n"
    )
    connection, head = exchange(https_port, request, tls=True)
    with connection:
        assert head.startswith(b"HTTP/1.1 101"), head
        # The first frame is zenweb's own: a close with its 4404 (no such socket).
        frame = head.split(b"\r\n\r\n", 1)[1]
        while len(frame) < 4:
            frame += connection.recv(4096)
        assert frame[0] & 0x0F == 0x8, frame
        assert struct.unpack("!H", frame[2:4])[0] == 4404
