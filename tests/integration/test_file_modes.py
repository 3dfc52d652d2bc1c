"""What zenweb keeps on disk is its own user's alone: the data directory
0700, the database, secret key and admin password 0600, workspaces 0700."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from agents.tools.builtin.files import workspace_root

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
