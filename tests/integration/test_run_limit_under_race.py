"""The active-run limit holds under a burst (issue 46.2): 50 commands sent at
once, each on its own thread and database connection, at a limit of 20,
start exactly 20 runs; the other 30 are answered 429 with Retry-After, and
none is a 201 or 202 carrying an error. On SQLite here; on PostgreSQL in
tests/services/test_run_limit_under_race.py."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from runs import queue
from runs.actions import do_register_workflow
from runs.models import Command, Run
from tests.integration.api_client import ECHO, api, post

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 20
BURST = 50


def test_a_burst_of_commands_starts_exactly_the_limit(owner, settings, monkeypatch):
    settings.ZENWEB_MAX_ACTIVE_RUNS = LIMIT
    monkeypatch.setattr(queue, "send_after_commit", lambda *args, **kwargs: None)  # no worker: runs stay pending
    do_register_workflow(ECHO, "echo.yaml")
    clients = [api(owner) for _ in range(BURST)]
    together = threading.Barrier(BURST)

    def send(n: int):
        try:
            together.wait()
            return post(clients[n], "/api/commands", {"command": f"echo for {n}"})
        finally:
            connection.close()  # each thread's own connection

    with ThreadPoolExecutor(BURST) as pool:
        answers = list(pool.map(send, range(BURST)))

    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [202] * LIMIT + [429] * (BURST - LIMIT)
    refused = [answer for answer in answers if answer.status_code == 429]
    assert {answer["Retry-After"] for answer in refused} == {"30"}
    assert all(f"at most {LIMIT} may be" in answer.json()["error"] for answer in refused)
    started = [answer.json() for answer in answers if answer.status_code == 202]
    assert {body["status"] for body in started} == {"running"}
    assert Run.objects.filter(created_by=owner).count() == LIMIT
    assert Command.objects.filter(created_by=owner).exclude(run=None).count() == LIMIT
