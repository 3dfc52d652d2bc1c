"""``/metrics``: Prometheus's text format, for a scraper that sends
``Authorization: Bearer <ZENWEB_METRICS_TOKEN>``; 404 while no token is set,
401 for any other request (docs/operations.md, "Metrics").

What processes count (agents/metrics.py) comes from this process or, with
PROMETHEUS_MULTIPROC_DIR set, from every process that wrote there (the
prefork workers' children included); what the database holds is read now
(runs/metrics_collector.py)."""

from __future__ import annotations

import hmac
import os

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from runs.metrics_collector import DatabaseCollector


def _allowed(request: HttpRequest) -> bool:
    given = request.headers.get("Authorization", "")
    expected = f"Bearer {settings.ZENWEB_METRICS_TOKEN}"
    return hmac.compare_digest(given.encode(), expected.encode())


def _registry() -> CollectorRegistry:
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    registry = CollectorRegistry(auto_describe=False)
    if directory:
        MultiProcessCollector(registry, path=directory)
    else:
        registry.register(REGISTRY)  # this process's own
    registry.register(DatabaseCollector())
    return registry


@login_not_required
@never_cache
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    if not settings.ZENWEB_METRICS_TOKEN:
        return HttpResponse("metrics are off: set ZENWEB_METRICS_TOKEN\n", status=404, content_type="text/plain")
    if not _allowed(request):
        response = HttpResponse("a bearer token is needed\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
