"""The production settings docs/production.md documents pass Django's deployment checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def documented_settings() -> str:
    """The shell block of docs/production.md's "Production settings"."""
    doc = (ROOT / "docs" / "production.md").read_text()
    section = doc.split("## Production settings", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def test_it_passes_check_deploy_with_the_documented_production_settings(tmp_path):
    keep = {"PATH", "HOME", "LANG", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k in keep} | {"ZENWEB_DATA_DIR": str(tmp_path)}
    script = f"{documented_settings()}\nexec {sys.executable} manage.py check --deploy --fail-level WARNING\n"

    done = subprocess.run(["bash", "-ec", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout, done.stdout + done.stderr


def test_it_warns_without_them(tmp_path):
    # The same check on the embedded default: the test above is not passing for want of checks.
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME"}} | {"ZENWEB_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0
    assert "security.W004" in done.stderr + done.stdout


def test_it_redirects_to_https_and_sends_secure_cookies_and_hsts_with_django_https(tmp_path):
    keep = {"PATH", "HOME", "LANG", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k in keep} | {
        "ZENWEB_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "zenweb.settings",
        "DJANGO_HTTPS": "1",
    }
    code = """
import django; django.setup()
from django.test import Client
client = Client()
plain = client.get("/login/")
print(plain.status_code, plain["Location"])
secure = client.get("/login/", secure=True)
print(secure["Strict-Transport-Security"])
print(secure.cookies["csrftoken"]["secure"])
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "301 https://testserver/login/",
        "max-age=31536000; includeSubDomains; preload",
        "True",
    ]
