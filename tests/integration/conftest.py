"""Fixtures of the tests that run on both databases: the database of this
pass, a running two-step run whose rows are written by hand on it, and the
tasks a test queues, recorded instead of published."""

from __future__ import annotations

import pytest
from celery.app.task import Task
from django.db import connection

from agents.router import COORDINATOR
from runs import queue
from runs.actions import do_register_workflow
from runs.models import Run, Step

TWO_STEPS = """\
name: store-sql
agents:
  worker: {description: worker agent, provider: scripted}
steps:
  - {id: s1, agent: worker}
  - {id: s2, agent: worker}
"""


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def vendor(request) -> str:
    """The database of this pass, for a test run once per database: SQLite
    in the first pass of `make test`, PostgreSQL (marked services) in the second."""
    if connection.vendor != request.param:
        pytest.fail(f"this pass runs on {connection.vendor}, not {request.param}: see scripts/test.sh")
    return request.param


@pytest.fixture
def recorded_tasks(monkeypatch) -> list:
    """The tasks queued in a test (name, args), recorded instead of published."""
    calls: list = []
    monkeypatch.setattr(queue, "publish", lambda task, args: calls.extend((task.name, a) for a in args))
    monkeypatch.setattr(Task, "apply_async", lambda task, args=None, *a, **k: calls.append((task.name, args)))
    return calls


@pytest.fixture
def two_step_run(vendor) -> Run:
    """A running run with steps s1 and s2, once per database (``vendor``)."""
    return _new_run()


@pytest.fixture
def pg_run() -> Run:
    if connection.vendor != "postgresql":
        pytest.fail(f"this pass runs on {connection.vendor}, not postgresql: see scripts/test.sh")
    return _new_run()


@pytest.fixture
def sqlite_run() -> Run:
    if connection.vendor != "sqlite":
        pytest.fail(f"this pass runs on {connection.vendor}, not sqlite: see scripts/test.sh")
    return _new_run()


def _new_run() -> Run:
    workflow, _ = do_register_workflow(TWO_STEPS, "tests/integration/conftest.py")
    run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING)
    Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
    for n, step in enumerate(("s1", "s2")):
        Step.objects.create(run=run, step_id=step, agent="worker", position=n, status=Step.Status.RUNNING)
    return run
