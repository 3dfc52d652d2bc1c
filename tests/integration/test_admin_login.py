"""`manage.py serve`'s admin login: created once, then left as its user keeps it."""

from __future__ import annotations

import io
import stat

import pytest
from django.contrib.auth import get_user_model

from zenweb.management.commands.serve import Command

pytestmark = pytest.mark.django_db


def admin_setup() -> str:
    """What serve's admin set-up prints on a start."""
    out = io.StringIO()
    _, login = Command(stdout=out)._admin()
    return login


@pytest.fixture
def data_dir(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("ZENWEB_ADMIN_PASSWORD", raising=False)
    settings.DATA_DIR = tmp_path
    return tmp_path


def test_it_keeps_a_password_the_admin_changed_across_restarts(data_dir):
    first = admin_setup()
    created = (data_dir / "admin_password").read_text()
    assert repr(created) in first
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("rotated-by-its-owner")
    admin.save()

    second = admin_setup()

    admin.refresh_from_db()
    assert admin.check_password("rotated-by-its-owner")
    assert not admin.check_password(created)
    assert created not in second
    assert "changepassword" in second


def test_it_prints_and_keeps_the_password_only_when_it_creates_the_admin(data_dir):
    first = admin_setup()

    password = (data_dir / "admin_password").read_text()
    assert f"log in with password {password!r}" in first
    assert stat.S_IMODE((data_dir / "admin_password").stat().st_mode) == 0o600
    assert password not in admin_setup()


def test_it_reads_zenweb_admin_password_only_to_create_the_admin(data_dir, monkeypatch):
    monkeypatch.setenv("ZENWEB_ADMIN_PASSWORD", "from-the-environment")
    first = admin_setup()
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password("from-the-environment")
    assert "from-the-environment" not in first
    assert not (data_dir / "admin_password").exists()
    admin.set_password("rotated-by-its-owner")
    admin.save()

    admin_setup()

    admin.refresh_from_db()
    assert admin.check_password("rotated-by-its-owner")
