"""The websocket application: the routes, a 404 close for any other path, and
failures of the services behind it (Redis, the database) answered with a
close the page retries, not a traceback and an HTTP 500.

Daphne sends only close codes 1000 and 3000-4999 (it refuses 1011 and keeps
the socket open, silent): the codes here are in the 4xxx range, and the
page's live.js reconnects after TRY_AGAIN.
"""

from __future__ import annotations

import contextlib
import logging

from channels.auth import AuthMiddlewareStack
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.routing import URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.db import DatabaseError
from django.urls import re_path
from redis.exceptions import RedisError

from runs.routing import websocket_urlpatterns

log = logging.getLogger(__name__)

NOT_FOUND = 4404
# A service behind the socket failed: the page reconnects (runs/static/js/live.js).
TRY_AGAIN = 4503
# Transient: a Redis or database connection lost or refused. Logged in a line.
SERVICE_ERRORS = (OSError, RedisError, DatabaseError)


class NotFound(AsyncWebsocketConsumer):
    """Any path with no route: accepted only to say 404 in the close code
    (a close before accepting is an HTTP 403 to the client)."""

    channel_layer_alias = None  # nothing to subscribe to, so Redis being away does not matter

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=NOT_FOUND)


class CloseOnFailure:
    """ASGI middleware: an exception from the websocket app becomes a close
    (before the handshake completes, daphne answers it with a 403; the
    page's extension reconnects after both)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        closed = False

        async def tracked_send(message: dict) -> None:
            nonlocal closed
            if message["type"] in ("websocket.close", "websocket.http.response.start"):
                closed = True
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except SERVICE_ERRORS as exc:
            log.warning("websocket %s closed: %s: %s", scope.get("path"), type(exc).__name__, exc)
        except Exception:
            log.exception("websocket %s failed", scope.get("path"))
        else:
            return
        if not closed:
            # The client may be gone already (a failure while disconnecting): nothing to tell it then.
            with contextlib.suppress(Exception):
                await send({"type": "websocket.close", "code": TRY_AGAIN})


def websocket_application():
    """What zenweb.asgi serves for websockets. The guard is outermost: the
    session lookup (AuthMiddlewareStack) and the channel layer's subscribe
    (before a consumer's connect) reach the services too."""
    routes = [*websocket_urlpatterns, re_path(r"", NotFound.as_asgi())]
    return CloseOnFailure(AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(routes))))
