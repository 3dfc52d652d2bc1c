"""Password logins are rate-limited per username and per address: after
ZENWEB_LOGIN_FAILURE_LIMIT failures even the right password is refused,
with a page that says why, until the lockout passes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LIMIT = 5


@pytest.fixture(autouse=True)
def lockout_limit(settings):
    assert settings.AXES_FAILURE_LIMIT == LIMIT


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-right-password")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-right-password", is_staff=True)


def log_in(username: str, password: str, address: str = "192.0.2.1", path: str = "/login/"):
    client = Client(REMOTE_ADDR=address)
    response = client.post(path, {"username": username, "password": password})
    return response, "_auth_user_id" in client.session


def test_it_locks_a_username_out_after_the_failure_limit_even_with_the_right_password(alice):
    for n in range(LIMIT - 1):
        response, logged_in = log_in("alice", f"guess-{n}", address=f"198.51.100.{n}")
        assert response.status_code == 200 and not logged_in
        assert "didn't match" in response.content.decode()

    locked, _ = log_in("alice", "guess-last", address="198.51.100.99")
    response, logged_in = log_in("alice", "alice-right-password", address="203.0.113.7")

    assert locked.status_code == 429
    assert response.status_code == 429 and not logged_in
    page = response.content.decode()
    assert "Too many failed logins (5) for this username or from this address" in page
    assert "even with the right password" in page


def test_it_locks_an_address_out_whatever_username_it_tries(alice, bob):
    for n in range(LIMIT):
        log_in(f"someone-{n}", "guess", address="192.0.2.66")

    from_there, there = log_in("alice", "alice-right-password", address="192.0.2.66")
    elsewhere, logged_in = log_in("alice", "alice-right-password", address="192.0.2.67")

    assert from_there.status_code == 429 and not there
    assert logged_in and elsewhere.status_code == 302


def test_it_counts_the_admin_sites_login_too(bob):
    for n in range(LIMIT):
        log_in("bob", f"guess-{n}", path="/admin/login/")

    response, logged_in = log_in("bob", "bob-right-password", path="/admin/login/")

    assert response.status_code == 429 and not logged_in


def test_it_lets_the_user_in_again_once_the_lockout_passes(settings, alice):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=1)
    for n in range(LIMIT):
        log_in("alice", f"guess-{n}")
    assert log_in("alice", "alice-right-password")[0].status_code == 429

    time.sleep(1.2)

    assert log_in("alice", "alice-right-password")[1]
