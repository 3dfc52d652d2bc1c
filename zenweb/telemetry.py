"""OpenTelemetry for this process, and what each log line says it belongs to.

``setup`` sets up the SDK only when the standard ``OTEL_*`` variables ask for
traces (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
or ``OTEL_TRACES_EXPORTER``; ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn it off): an OTLP/HTTP exporter (the SDK reads
its endpoint, headers, timeout, batch and sampler settings from the
variables), and the official instrumentations of Django, Celery and
psycopg. Without them nothing is set up, and agents/telemetry.py's spans
are the API's no-ops. The run's own spans: agents/telemetry.py.

``LogContext`` is the logging filter of ``ZENWEB_LOG_FORMAT=json``: each
record gets the current span's trace and span ids, the Celery task's id,
and the run and step ids a call passed with ``extra=`` or the current span
of a run carries.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry import trace

from agents import telemetry as run_telemetry

log = logging.getLogger(__name__)

_EXPORTERS = {"otlp", "console"}


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the OTEL_* variables ask this process to export traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def setup(environ: Mapping[str, str] = os.environ) -> bool:
    """Set up tracing for this process if the variables ask for it (once):
    whether it traces now. Call before Django builds its request handler
    (the Django instrumentation adds a middleware)."""
    if run_telemetry.tracing():
        return True
    if not requested(environ):
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter_name = environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter_name not in _EXPORTERS:
        log.warning("OTEL_TRACES_EXPORTER=%s is not one zenweb has (otlp, console): otlp is used", exporter_name)
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win; "zenweb" rather than "unknown_service".
    named = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "zenweb"}
    provider = TracerProvider(resource=Resource.create(named), id_generator=run_telemetry.RunSpanIds())
    provider.add_span_processor(BatchSpanProcessor(_exporter(exporter_name)))
    trace.set_tracer_provider(provider)
    _instrument(environ)
    return True


def _exporter(name: str):
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _instrument(environ: Mapping[str, str]) -> None:
    """The official instrumentations, but those OTEL_PYTHON_DISABLED_INSTRUMENTATIONS
    names (``django``, ``celery``, ``psycopg``; as opentelemetry-instrument reads it)."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    disabled = {name.strip() for name in environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")}
    if "django" not in disabled:
        DjangoInstrumentor().instrument()
    if "celery" not in disabled:
        # Task headers carry the trace from the process that queued a task to the worker.
        CeleryInstrumentor().instrument()
    if "psycopg" not in disabled:
        # Statements are traced without their parameters (psycopg sends them apart).
        PsycopgInstrumentor().instrument()


def flush(timeout_millis: int = 5000) -> None:
    """Export what is held now (a worker process about to exit)."""
    provider = trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if force_flush is not None:
        force_flush(timeout_millis)


class LogContext(logging.Filter):
    """Adds ``trace_id``, ``span_id``, ``task_id``, ``run_id`` and ``step_id``
    to each record, where known: ids passed with ``extra=`` are kept; the
    trace from the current span; the task id from Celery's current task; the
    run and step from the current span's attributes (a run's spans carry
    them, agents/telemetry.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        span = trace.get_current_span()
        context = span.get_span_context()
        if context.is_valid:
            record.trace_id = getattr(record, "trace_id", None) or f"{context.trace_id:032x}"
            record.span_id = getattr(record, "span_id", None) or f"{context.span_id:016x}"
        attributes = getattr(span, "attributes", None) or {}
        for name, key in (("run_id", "zenweb.run.id"), ("step_id", "zenweb.step.id")):
            if getattr(record, name, None) is None and key in attributes:
                setattr(record, name, attributes[key])
        if getattr(record, "task_id", None) is None:
            task_id = _task_id()
            if task_id:
                record.task_id = task_id
        return True


def _task_id() -> str | None:
    from celery import current_task

    request = getattr(current_task, "request", None) if current_task else None
    return getattr(request, "id", None)
