"""Health endpoints for load balancers, orchestrators and systemd
(docs/operations.md, "Health checks").

``/healthz``: the process is up and answers HTTP. It touches nothing else,
so a database outage never gets every web process restarted.

``/readyz``: this process can serve: its database answers (with every
migration applied) and, in services mode, Redis (the broker and channel
layer) answers a PING. 503 naming what is down otherwise. Why is logged, not
shown: the endpoint answers anyone, and the reasons name hosts.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from runs.store.sql import store

log = logging.getLogger(__name__)

# A probe waits at most this long for Redis; a load balancer's own timeout is
# usually a few seconds.
BROKER_TIMEOUT = 2.0


def _broker_problem() -> str | None:
    if not settings.REDIS_URL:
        return None  # embedded: the broker is this process's memory
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=BROKER_TIMEOUT, socket_timeout=BROKER_TIMEOUT
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"cannot reach Redis (REDIS_URL): {exc}"
    finally:
        client.close()
    return None


@login_not_required
@never_cache
@require_safe
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@login_not_required
@never_cache
@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    problems = {"database": store().database_problem(), "broker": _broker_problem()}
    for what, problem in problems.items():
        if problem:
            log.warning("not ready: %s: %s", what, problem)
    checks = {what: "down" if problem else "ok" for what, problem in problems.items()}
    if not settings.REDIS_URL:
        checks["broker"] = "in-process"
    down = any(problems.values())
    return JsonResponse({"status": "unavailable" if down else "ok", "checks": checks}, status=503 if down else 200)
