"""A webhook zenweb cannot sign for, or an address that is not one, stops
the start with the variable's name rather than posting unsigned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = "https://hooks.example.com/zenweb"


def start(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    keep = {"PATH", "HOME", "LANG", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k in keep} | {
        "ZENWEB_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "zenweb.settings",
        **variables,
    }
    code = "import django; django.setup(); from django.conf import settings; print(settings.ZENWEB_BASE_URL)"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        (
            {"ZENWEB_APPROVAL_WEBHOOK_URL": HOOK},
            "ZENWEB_APPROVAL_WEBHOOK_URL needs ZENWEB_APPROVAL_WEBHOOK_SECRET",
        ),
        (
            {"ZENWEB_APPROVAL_WEBHOOK_URL": HOOK, "ZENWEB_APPROVAL_WEBHOOK_SECRET": "short"},
            "(16 characters or more)",
        ),
        (
            {"ZENWEB_APPROVAL_WEBHOOK_URL": "hooks.example.com", "ZENWEB_APPROVAL_WEBHOOK_SECRET": "s" * 32},
            "ZENWEB_APPROVAL_WEBHOOK_URL must be an http:// or https:// address",
        ),
    ],
)
def test_a_webhook_that_cannot_be_signed_or_reached_stops_the_start(tmp_path, variables, says):
    done = start(tmp_path, **variables)

    assert done.returncode != 0
    assert says in done.stderr


def test_the_base_url_is_kept_without_its_trailing_slash(tmp_path):
    done = start(
        tmp_path,
        ZENWEB_BASE_URL="https://zen.example.com/",
        ZENWEB_APPROVAL_WEBHOOK_URL=HOOK,
        ZENWEB_APPROVAL_WEBHOOK_SECRET="s" * 32,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "https://zen.example.com"
