"""A database that cannot be had just now (the web pool empty past its
timeout, "too many clients", a lost connection) is a 503 with Retry-After,
JSON on the API, not a 500; any other error is still a 500. And which
process borrows from a pool (zenweb/databases.py)."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from runs.api import views as api_views
from tests.integration.api_client import api
from zenweb.databases import postgres, serves_http

pytestmark = pytest.mark.django_db


def _fail_with(monkeypatch, exc: Exception) -> None:
    def fail(*args, **kwargs):
        raise exc

    monkeypatch.setattr(api_views, "visible_runs", fail)


def test_an_api_request_without_a_connection_is_a_503_with_retry_after(owner, monkeypatch):
    client = api(owner)
    client.raise_request_exception = False
    _fail_with(monkeypatch, OperationalError("couldn't get a connection after 10.00 sec"))
    answer = client.get("/api/runs")
    assert (answer.status_code, answer["Retry-After"]) == (503, "5")
    assert answer.json() == {"error": "the database is busy: try again shortly"}

    _fail_with(monkeypatch, ValueError("a bug"))
    assert client.get("/api/runs").status_code == 500


def test_a_page_without_a_connection_is_a_503_too(owner, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    monkeypatch.setattr(
        "runs.actions.visible_runs", lambda user: (_ for _ in ()).throw(OperationalError("sorry, too many clients"))
    )
    answer = client.get("/")
    assert (answer.status_code, answer["Retry-After"]) == (503, "5")
    assert "the database is busy" in answer.content.decode()


@pytest.mark.parametrize(
    ("argv", "web"),
    [
        (["/venv/bin/daphne", "zenweb.asgi:application"], True),
        (["/venv/lib/python3.11/site-packages/daphne/__main__.py", "-p", "8000", "zenweb.asgi:application"], True),
        (["manage.py", "serve"], True),
        (["manage.py", "runserver"], True),
        (["manage.py", "migrate"], False),
        (["/venv/bin/celery", "-A", "zenweb", "worker"], False),
        ([], False),
    ],
)
def test_only_the_processes_that_serve_http_borrow_from_a_pool(argv, web):
    assert serves_http(argv) is web
    options = postgres({"NAME": "z"}, web=web, pool=7, timeout=3.0, prepare=True)
    if web:
        assert (options["CONN_MAX_AGE"], options["CONN_HEALTH_CHECKS"], options["OPTIONS"]["pool"]["max_size"]) == (
            0,
            True,
            7,
        )
    else:
        assert (options["CONN_MAX_AGE"], "pool" in options["OPTIONS"]) == (60, False)
    assert options["OPTIONS"]["prepare_threshold"] == 5
