"""The Procfile as a PaaS runs it: each line through a shell, the virtualenv
on PATH, PORT set by the platform. release migrates; web answers on every
address at $PORT."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line and not line.startswith("#"))


def platform_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **extra}
    env["ZENWEB_DATA_DIR"] = str(tmp_path)
    for name in ("DATABASE_URL", "REDIS_URL", "HOST"):
        env.pop(name, None)
    return env


def test_release_migrates(tmp_path):
    done = subprocess.run(
        procfile()["release"], shell=True, cwd=ROOT, env=platform_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "zenweb.sqlite3") as db:
        (applied,) = db.execute("SELECT count(*) FROM django_migrations WHERE app = 'runs'").fetchone()
        (workflows,) = db.execute("SELECT count(*) FROM runs_workflow").fetchone()
    assert applied == len(list((ROOT / "runs" / "migrations").glob("0*.py")))
    assert workflows >= 1  # the catalog, loaded


def test_web_serves_on_port_on_every_address(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "web.log"
    with log.open("wb") as out:
        web = subprocess.Popen(
            procfile()["web"],
            shell=True,
            cwd=ROOT,
            env=platform_env(tmp_path, PORT=str(port)),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert web.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        # Listening (state 0A) on 0.0.0.0, as the kernel lists its sockets.
        sockets = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
        assert [f"00000000:{port:04X}", "0A"] in [[s[1], s[3]] for s in sockets]
    finally:
        os.killpg(web.pid, 15)
        web.wait(timeout=10)
