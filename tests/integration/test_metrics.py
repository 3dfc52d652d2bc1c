"""/metrics: refused without its token; after runs, its counters and
histograms moved as the runs did, and the database's gauges say what waits."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import OPENAI_TEST_MODEL, register, wait_for_run
from tests.metrics_scrape import TOKEN, moved, scrape, value

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def metrics_on(settings):
    settings.ZENWEB_METRICS_TOKEN = TOKEN
    return Client()


def test_metrics_are_off_without_a_token_and_refused_without_the_right_one(settings):
    settings.ZENWEB_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    settings.ZENWEB_METRICS_TOKEN = TOKEN
    assert Client().get("/metrics").status_code == 401
    wrong = Client().get("/metrics", headers={"Authorization": "Bearer not-it"})
    assert wrong.status_code == 401
    assert b"zenweb_" not in wrong.content


def test_a_runs_model_calls_tokens_and_tool_calls_move_the_counters(metrics_on, celery_worker, openai_endpoint):
    openai_endpoint.push_tool_calls([("call_1", "send_message", json.dumps({"text": "tides are high"}))])
    openai_endpoint.push_text("High tide at 6am.")
    before = scrape(metrics_on)

    run = wait_for_run(do_create_run(register("openai_step"), {}))
    after = scrape(metrics_on)

    assert run.status == Run.Status.COMPLETED
    assert moved(before, after, "zenweb_runs_started_total", workflow="openai_step") == 1
    assert moved(before, after, "zenweb_runs_ended_total", workflow="openai_step", status="completed") == 1
    ran = {"workflow": "openai_step", "status": "completed"}
    assert moved(before, after, "zenweb_run_duration_seconds_count", **ran) == 1
    assert moved(before, after, "zenweb_run_duration_seconds_sum", **ran) > 0
    assert moved(before, after, "zenweb_step_duration_seconds_count", status="completed") >= 1
    step = run.steps.get(step_id="analyse")
    assert moved(before, after, "zenweb_model_calls_total", model=OPENAI_TEST_MODEL, outcome="ok") == 2
    assert moved(before, after, "zenweb_model_call_duration_seconds_count", model=OPENAI_TEST_MODEL) == 2
    tokens = {
        kind: moved(before, after, "zenweb_model_tokens_total", model=OPENAI_TEST_MODEL, kind=kind)
        for kind in ("prompt", "completion")
    }
    assert tokens == {"prompt": step.prompt_tokens, "completion": step.completion_tokens}
    assert tokens["prompt"] > 0
    assert moved(before, after, "zenweb_tool_calls_total", tool="send_message", outcome="ok") == 1


def test_a_failed_model_call_counts_as_an_error_and_the_run_as_failed(metrics_on, celery_worker, openai_endpoint):
    for _attempt in range(3):  # the SDK retries twice before giving up
        openai_endpoint.push_error(500, "upstream exploded")
    before = scrape(metrics_on)

    run = wait_for_run(do_create_run(register("openai_step"), {}), timeout=60)
    after = scrape(metrics_on)

    assert run.status == Run.Status.FAILED
    assert moved(before, after, "zenweb_model_calls_total", model=OPENAI_TEST_MODEL, outcome="error") == 1
    assert moved(before, after, "zenweb_runs_ended_total", workflow="openai_step", status="failed") == 1
    assert moved(before, after, "zenweb_step_duration_seconds_count", status="failed") == 1


def test_work_no_worker_took_shows_as_queued_with_its_age(metrics_on):
    do_create_run(register("openai_step"), {})
    do_create_run(register("openai_step"), {})

    samples = scrape(metrics_on)

    assert value(samples, "zenweb_queue_depth", kind="run_start") == 2
    assert value(samples, "zenweb_queue_oldest_age_seconds", kind="run_start") > 0
    assert value(samples, "zenweb_approvals_waiting") == 0
