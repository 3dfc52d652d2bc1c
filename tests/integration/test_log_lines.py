"""Logs and traces as a process sets them up from its environment: JSON
lines with the run, step, task and trace they belong to
(ZENWEB_LOG_FORMAT=json), and no tracing at all without OTEL_* variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from zenweb import telemetry
from zenweb.env import env_choice

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import logging
import django

django.setup()
from zenweb import telemetry
from zenweb.celery import app
from agents import telemetry as spans

print("tracing", telemetry.setup(), spans.tracing(), flush=True)
log = logging.getLogger("zenweb.probe")
run = spans.new_run_context()
with spans.agent_span(run, 7, "writer", "draft"):
    log.warning("in a turn")
log.warning("told", extra={"run_id": 9, "step_id": "summary"})


@app.task(name="probe")
def probe():
    log.warning("in a task")


probe.apply(task_id="task-42")
"""


def _run(**env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "ZENWEB_LOG_FORMAT"))}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "zenweb.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _lines(stderr: str) -> dict[str, dict]:
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return {line["message"]: line for line in lines if line["name"] == "zenweb.probe"}


def test_json_lines_carry_the_run_step_task_and_trace_they_belong_to():
    done = _run(ZENWEB_LOG_FORMAT="json", OTEL_TRACES_EXPORTER="console")

    assert "tracing True True" in done.stdout
    lines = _lines(done.stderr)
    turn = lines["in a turn"]
    assert (turn["run_id"], turn["step_id"], turn["levelname"]) == (7, "draft", "WARNING")
    assert len(turn["trace_id"]) == 32 and len(turn["span_id"]) == 16
    # The span written by the console exporter is the one the line names.
    assert turn["trace_id"] in done.stdout.replace("0x", "")
    told = lines["told"]
    assert (told["run_id"], told["step_id"]) == (9, "summary") and "trace_id" not in told
    assert lines["in a task"]["task_id"] == "task-42"


def test_without_otel_variables_nothing_is_set_up_and_lines_name_ids_passed():
    done = _run(ZENWEB_LOG_FORMAT="json")

    assert "tracing False False" in done.stdout
    lines = _lines(done.stderr)
    assert "run_id" not in lines["in a turn"] and "trace_id" not in lines["in a turn"]
    assert lines["told"]["run_id"] == 9
    assert lines["in a task"]["task_id"] == "task-42"


def test_plain_lines_by_default():
    done = _run()

    assert "WARNING zenweb.probe" in done.stderr and "in a turn" in done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("{")]


@pytest.mark.parametrize(
    ("environ", "traced"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_the_standard_variables_decide_whether_a_process_traces(environ, traced):
    assert telemetry.requested(environ) is traced


def test_an_unknown_log_format_names_the_variable(monkeypatch):
    monkeypatch.setenv("ZENWEB_LOG_FORMAT", "xml")
    with pytest.raises(ImproperlyConfigured, match="ZENWEB_LOG_FORMAT='xml' is not one of line, json"):
        env_choice("ZENWEB_LOG_FORMAT", ("line", "json"), "line")
