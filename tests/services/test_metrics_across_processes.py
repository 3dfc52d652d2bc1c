"""/metrics with two prefork worker processes writing to one
PROMETHEUS_MULTIPROC_DIR: the scrape sums what every worker child counted."""

from __future__ import annotations

import pytest
from django.db.models import Sum
from django.test import Client

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import wait_for_run
from tests.integration.test_queued_turns import register_text, wide
from tests.metrics_scrape import TOKEN, scrape, value
from tests.services.conftest import workers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_the_scrape_sums_the_counts_of_two_worker_processes(tmp_path, settings, monkeypatch):
    shared = tmp_path / "prometheus"
    shared.mkdir()
    settings.ZENWEB_METRICS_TOKEN = TOKEN
    workflow = register_text(wide(12))
    with workers(tmp_path, "metrics-a", "metrics-b", env={"PROMETHEUS_MULTIPROC_DIR": str(shared)}, ready_timeout=120):
        runs = [wait_for_run(do_create_run(workflow, {}), timeout=90) for _ in range(2)]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(shared))

    samples = scrape(Client())

    assert [run.status for run in runs] == [Run.Status.COMPLETED] * 2
    # Each worker process's children wrote files of their own, and the scrape adds them up.
    assert len({path.name.rsplit("_", 1)[-1] for path in shared.glob("counter_*.db")}) >= 2
    assert value(samples, "zenweb_runs_started_total", workflow="wide") == 2
    assert value(samples, "zenweb_runs_ended_total", workflow="wide", status="completed") == 2
    assert value(samples, "zenweb_run_duration_seconds_count", workflow="wide", status="completed") == 2
    assert value(samples, "zenweb_step_duration_seconds_count", status="completed") >= 2 * 12
    stored = Run.objects.filter(pk__in=[run.pk for run in runs]).aggregate(prompt=Sum("steps__prompt_tokens"))
    counted = sum(
        v for (name, _), v in samples.items() if name == "zenweb_model_tokens_total" and ("kind", "prompt") in _
    )
    assert counted == stored["prompt"]
    # The queue is read from the database at the scrape: nothing waits.
    assert value(samples, "zenweb_queue_depth", kind="step_turn") == 0
