"""A database that cannot be had just now is a 503 with Retry-After, not a
500: the web process's pool had no connection free within
ZENWEB_DB_POOL_TIMEOUT, the server refused one ("too many clients
already"), or it was lost. The client may try again; nothing is wrong with
its request.

Django turns an exception raised anywhere in a request (a view, a
middleware's check of the session or the user) into the ``handler500``
view, inside the except block: the exception is still current there.
"""

from __future__ import annotations

import logging
import sys

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import server_error as django_server_error

from runs.store.sql.errors import connection_lost, first_line

log = logging.getLogger(__name__)

# Seconds a client is told to wait: about one pool timeout's worth of
# requests finishing.
RETRY_AFTER_SECONDS = 5
BUSY = "the database is busy: try again shortly"


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    exc = sys.exc_info()[1]
    if exc is None or not connection_lost(exc):
        return django_server_error(request, template_name)
    log.warning("%s %s: 503, %s", request.method, request.path, first_line(exc))
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": BUSY}, status=503)
    else:
        response = HttpResponse(f"503 Service Unavailable: {BUSY}\n", status=503, content_type="text/plain")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
