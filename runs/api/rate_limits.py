"""Commands per minute for each API token (a browser session counts as a
token of its own): past ZENWEB_API_COMMANDS_PER_MINUTE, POST
/api/commands is a 429 with Retry-After, before the command is read by any
model.

Counted in the ``rate_limits`` cache (Redis when REDIS_URL is set, so every
web process shares the count; else this process's memory), one counter per
token and calendar minute. A cache that cannot be reached counts nothing:
the limit is a brake on a runaway script, and ZENWEB_MAX_ACTIVE_RUNS still
holds.
"""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest

from runs.api.errors import ApiError
from runs.models import ApiToken

log = logging.getLogger(__name__)
WINDOW_SECONDS = 60
clock = time.time  # the tests hold it still


def check_command_rate(request: HttpRequest) -> None:
    """Count this command against its token; ApiError(429) past the limit."""
    limit = settings.ZENWEB_API_COMMANDS_PER_MINUTE
    if limit <= 0:
        return
    now = clock()
    window = int(now // WINDOW_SECONDS)
    key = f"api-commands:{_caller(request)}:{window}"
    cache = caches["rate_limits"]
    try:
        cache.add(key, 0, timeout=WINDOW_SECONDS + 1)
        count = cache.incr(key)
    except Exception as exc:  # Redis away: see the module's docstring.
        log.warning("command rate not counted: %s", exc)
        return
    if count > limit:
        retry_after = max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))
        raise ApiError(
            429,
            f"too many commands: at most {limit} a minute per token (ZENWEB_API_COMMANDS_PER_MINUTE)",
            retry_after=retry_after,
        )


def _caller(request: HttpRequest) -> str:
    """The token, or the session: named by what no other one shares (an id
    may come back once its row is deleted)."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiToken):
        return f"token-{auth.key_hash[:32]}"
    return f"session-{request.session.session_key}"
