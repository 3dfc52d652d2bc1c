"""zenweb's Prometheus metrics, counted where things happen (the
collector of what the database holds, read at scrape time:
runs/metrics_collector.py; the endpoint: zenweb/metrics.py).

prometheus-client only, no Django. Under prefork workers each process
writes its values to PROMETHEUS_MULTIPROC_DIR (prometheus-client's
multiprocess mode, chosen when the variable is set before the first import)
and the endpoint sums them. Label values are what the operator's workflows
name (workflows, models, tools) or a fixed set (statuses, reasons)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_SECONDS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

RUNS_STARTED = Counter("zenweb_runs_started", "Runs started, by workflow.", ["workflow"])
RUNS_ENDED = Counter("zenweb_runs_ended", "Runs ended, by workflow and status.", ["workflow", "status"])
RUN_SECONDS = Histogram(
    "zenweb_run_duration_seconds", "A run's time from start to end.", ["workflow", "status"], buckets=_SECONDS
)
STEP_SECONDS = Histogram(
    "zenweb_step_duration_seconds", "A step's time from start to end.", ["status"], buckets=_SECONDS
)
MODEL_CALLS = Counter("zenweb_model_calls", "Model calls, by model and outcome (ok, error).", ["model", "outcome"])
MODEL_CALL_SECONDS = Histogram(
    "zenweb_model_call_duration_seconds", "A model call's latency, retries included.", ["model"], buckets=_SECONDS
)
MODEL_COST = Counter(
    "zenweb_model_cost",
    "Cost at the operator's prices; models with no price absent.",
    ["model"],
)
MODEL_TOKENS = Counter("zenweb_model_tokens", "Tokens the models reported, by model and kind.", ["model", "kind"])
TOOL_CALLS = Counter(
    "zenweb_tool_calls", "Tool calls ended, by tool and outcome (ok, error, pending).", ["tool", "outcome"]
)
DROPS = Counter("zenweb_message_drops", "Messages dropped, by reason.", ["reason"])
WEBSOCKET_CLIENTS = Gauge("zenweb_websocket_clients", "Run pages open live.", multiprocess_mode="livesum")


def run_started(workflow: str) -> None:
    RUNS_STARTED.labels(workflow).inc()


def run_ended(workflow: str, status: str, seconds: float | None) -> None:
    RUNS_ENDED.labels(workflow, status).inc()
    if seconds is not None:
        RUN_SECONDS.labels(workflow, status).observe(seconds)


def step_ended(status: str, seconds: float | None) -> None:
    if seconds is not None:
        STEP_SECONDS.labels(status).observe(seconds)


def model_called(model: str, seconds: float, prompt_tokens: int, completion_tokens: int, cost: float | None) -> None:
    """One model call that answered, ``seconds`` long, with the usage it
    reported and what that cost (None: the model has no price)."""
    MODEL_CALLS.labels(model, "ok").inc()
    MODEL_CALL_SECONDS.labels(model).observe(seconds)
    MODEL_TOKENS.labels(model, "prompt").inc(prompt_tokens or 0)
    MODEL_TOKENS.labels(model, "completion").inc(completion_tokens or 0)
    if cost is not None:
        MODEL_COST.labels(model).inc(cost)


def model_failed(model: str, seconds: float) -> None:
    MODEL_CALLS.labels(model, "error").inc()
    MODEL_CALL_SECONDS.labels(model).observe(seconds)


def tool_call_ended(tool: str, ok: bool | None, pending: bool = False) -> None:
    TOOL_CALLS.labels(tool, "pending" if pending else "ok" if ok else "error").inc()


def message_dropped(reason: str) -> None:
    DROPS.labels(reason).inc()
