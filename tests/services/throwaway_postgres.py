"""A PostgreSQL server of the test's own, on a free port, that a test may
crash and start again (never the machine's PostgreSQL): ``initdb`` into a
directory under /tmp, run as the ``postgres`` OS user (PostgreSQL refuses
root), trust authentication, listening on 127.0.0.1 only. Its ``url`` names
a database ``zenweb`` that ``migrate`` has given the schema."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
OS_USER = "postgres"


def server_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None."""
    candidates = []
    if shutil.which("pg_config"):
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        candidates.append(bindir)
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for bindir in candidates:
        if all((Path(bindir) / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return Path(bindir)
    return None


class ThrowawayPostgres:
    def __init__(self, bindir: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.bindir = bindir
        # Not the pytest tmp_path: the postgres user may not reach it.
        self.directory = Path(tempfile.mkdtemp(prefix="zenweb-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "postgres.log"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/zenweb"

    def init(self) -> None:
        user = pwd.getpwnam(OS_USER)
        os.chown(self.directory, user.pw_uid, user.pw_gid)
        self._as_postgres("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-c port={self.port}",
            f"-c unix_socket_directories={self.directory}",
            # The WAL writer flushes asynchronous commits every wal_writer_delay
            # (10 s is its maximum): until then a claim committed with
            # synchronous_commit off (runs/store/sql/rows.py LEASE_ONLY_COMMIT) is
            # only in PostgreSQL's memory, unless a later synchronous commit
            # flushed it, and a crash loses it.
            "-c wal_writer_delay=10000ms",
            # Nor does anything else flush the WAL behind the workers' backs:
            # no autovacuum commits, no background writer writing a page (which
            # flushes the WAL up to that page's last change first).
            "-c autovacuum=off",
            "-c bgwriter_lru_maxpages=0",
        ]
        # pg_ctl's -o takes the server's options as one string; -w waits for
        # the server to accept connections (after a crash: after recovery).
        data, log = str(self.data), str(self.log)
        self._as_postgres("pg_ctl", "start", "-w", "-t", "30", "-D", data, "-l", log, "-o", " ".join(options))

    def crash(self) -> None:
        """What `pg_ctl stop -m immediate` does, without its start-up time:
        SIGQUIT to the postmaster, whose processes all exit at once with
        nothing written; the next start recovers from the WAL on disk."""
        os.kill(self._postmaster_pid(), signal.SIGQUIT)
        self._wait_until_stopped()

    def restart(self, down: float = 1.0) -> None:
        """A clean restart, as an upgrade or a failover does: `pg_ctl stop -m
        fast` (sessions ended, their transactions rolled back, a checkpoint),
        ``down`` seconds away, then started again."""
        self._as_postgres("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data))
        time.sleep(down)
        self.start()

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_postgres("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data), check=False)

    def create_database(self) -> None:
        with psycopg.connect(self.url.replace("/zenweb", "/postgres"), autocommit=True) as db:
            db.execute("CREATE DATABASE zenweb")

    def migrate(self) -> None:
        manage = [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"]
        done = subprocess.run(manage, cwd=ROOT, env={**os.environ, "DATABASE_URL": self.url}, capture_output=True)
        assert done.returncode == 0, f"migrate failed:\n{done.stdout.decode()}\n{done.stderr.decode()}"

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def _postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def _wait_until_stopped(self) -> None:
        deadline = time.monotonic() + 15
        while (self.data / "postmaster.pid").exists():
            assert time.monotonic() < deadline, f"postgres on {self.port} did not stop"
            time.sleep(0.02)

    def _as_postgres(self, program: str, *args: str, check: bool = True) -> None:
        command = ["runuser", "-u", OS_USER, "--", str(self.bindir / program), *args]
        done = subprocess.run(command, cwd=self.directory, capture_output=True, text=True)
        if check and done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise AssertionError(f"{program} {' '.join(args)} failed:\n{done.stdout}{done.stderr}\n{log[-3000:]}")


@pytest.fixture
def own_postgres() -> Iterator[ThrowawayPostgres]:
    bindir = server_binaries()
    missing = "the PostgreSQL server binaries (initdb, pg_ctl, postgres)" if bindir is None else ""
    if not missing and shutil.which("runuser") is None:
        missing = "runuser"
    if not missing:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            missing = f"an OS user {OS_USER!r}"
    if missing:
        message = f"a throwaway PostgreSQL needs {missing}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = ThrowawayPostgres(bindir)
    try:
        server.init()
        server.start()
        server.create_database()
        server.migrate()
        yield server
    finally:
        server.stop()
        server.remove()
