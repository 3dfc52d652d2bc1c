"""ASGI entry point: HTTP through Django, websockets through channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zenweb.settings")

from zenweb import telemetry  # noqa: E402

# Before Django builds its handler: the Django instrumentation adds a middleware.
telemetry.setup()
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

from zenweb.daphne_bodies import leave_bodies_to_django  # noqa: E402
from zenweb.websockets import websocket_application  # noqa: E402

leave_bodies_to_django()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_application(),
    }
)

# What is loaded now lives as long as the process: kept out of the garbage
# collector's full passes, which otherwise scan it between renders.
gc.freeze()
