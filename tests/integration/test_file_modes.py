"""What zenweb keeps on disk is its own user's alone: the data directory
0700, the database, secret key and admin password 0600, workspaces 0700."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from agents.tools.builtin.workspace import workspace_root

ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_it_creates_the_data_directory_and_its_files_for_its_own_user_only(tmp_path):
    data = tmp_path / "var"
    drop = {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "ZENWEB_TEST_DB", "ZENWEB_ADMIN_PASSWORD"}
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"ZENWEB_DATA_DIR": str(data)}
    # A umask that leaves new files world-readable, as most do.
    code = "import os; os.umask(0o022); import django; django.setup()"
    env["DJANGO_SETTINGS_MODULE"] = "zenweb.settings"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=60)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from zenweb.management.commands.serve import Command; Command()._admin()",
        ],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
    )

    assert mode(data) == 0o700
    for name in ("zenweb.sqlite3", "secret_key", "admin_password"):
        assert mode(data / name) == 0o600, name
    for wal in data.glob("zenweb.sqlite3-*"):
        assert mode(wal) == 0o600, wal.name


def test_it_tightens_files_an_older_zenweb_left_readable(tmp_path):
    data = tmp_path / "var"
    data.mkdir(mode=0o755)
    for name in ("zenweb.sqlite3", "secret_key"):
        (data / name).write_text("")
        (data / name).chmod(0o644)
    (data / "secret_key").write_text("an-old-key")
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL"}}
    env |= {"ZENWEB_DATA_DIR": str(data), "DJANGO_SETTINGS_MODULE": "zenweb.settings"}

    subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env, check=True, timeout=60)

    assert mode(data) == 0o700
    assert mode(data / "zenweb.sqlite3") == 0o600
    assert mode(data / "secret_key") == 0o600


def test_it_creates_run_workspaces_for_its_own_user_only(tmp_path):
    old = os.umask(0o022)
    try:
        root = workspace_root(str(tmp_path / "workspaces" / "run-7"))
    finally:
        os.umask(old)

    assert mode(root) == 0o700


# Each process: wait for the same instant, then ask for the key at path
# number k, for k in 0..TRIES-1, one instant apart.
RACE = """
import sys, time
from pathlib import Path
from zenweb.private_files import keep_first
folder, text, at, tries = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
for k in range(tries):
    while time.time() < at + k * 0.02:
        pass
    print(keep_first(folder / f"secret_key_{k}", text))
"""


def test_processes_that_make_the_secret_key_at_once_agree_on_one_and_never_read_half_of_it(tmp_path):
    # The embedded default's key is made by whichever process starts first
    # (a server and a worker, the suite's two passes). Checked, then
    # written: two processes starting together each made their own, or one
    # read the other's file still empty (Django refuses an empty SECRET_KEY).
    tries, processes = 40, 6
    at = time.time() + 1.5  # past every process's start
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(tmp_path), f"key-of-{n}", str(at), str(tries)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    seen = [start.communicate(timeout=60)[0].splitlines() for start in starts]

    assert [start.returncode for start in starts] == [0] * processes
    for k in range(tries):
        kept = (tmp_path / f"secret_key_{k}").read_text()
        assert {lines[k] for lines in seen} == {kept} and kept.startswith("key-of-")
        assert mode(tmp_path / f"secret_key_{k}") == 0o600
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []
