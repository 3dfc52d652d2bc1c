"""Group messages of channels_redis' pub/sub layer, published from plain
synchronous code (a worker's commit) with redis-py's synchronous client.

The layer itself is asyncio: a worker reached it through an event loop in
a thread of its own, and the hop there and back (waking that loop, a task,
the asyncio Redis client) cost about 1 ms of CPU per commit, as much as the
commit. A group message of RedisPubSubChannelLayer is one PUBLISH of the
layer's serialized message to ``<prefix>__group__<group>``, which this sends
on a connection of its own, in about 0.05 ms, without waiting for the reply.
Consumers subscribe through the layer as usual.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

log = logging.getLogger(__name__)

# Redis away: give up on a publish after this long, and publish nothing for
# QUIET_SECONDS after a failure, so that no commit waits on a dead server.
# The dashboards' poll (ZENWEB_LIVE_POLL_SECONDS) finds what they missed.
TIMEOUT_SECONDS = 0.5
QUIET_SECONDS = 1.0


class PubSubPublisher:
    def __init__(self, layer: RedisPubSubChannelLayer, address: str, prefix: str) -> None:
        self.layer = layer
        self.prefix = prefix
        self.options = redis.connection.parse_url(address)
        self.options |= {"socket_timeout": TIMEOUT_SECONDS, "socket_connect_timeout": TIMEOUT_SECONDS}
        # rediss:// and unix:// name a class of their own.
        self.connection_class = self.options.pop("connection_class", redis.Connection)
        self.quiet_until = 0.0
        self._lock = threading.Lock()
        self._connection: redis.Connection | None = None
        self._pid = 0
        self._reply_due = False

    def group_send(self, group: str, message: dict) -> bool:
        """PUBLISH ``message`` to ``group``'s subscribers, as the layer's
        group_send would. False if it was not sent (Redis away)."""
        if time.monotonic() < self.quiet_until:
            return False
        payload = self.layer.serialize(message)
        with self._lock:
            try:
                connection = self._connected()
                # The reply (how many listened) is read at the next publish,
                # by when it has arrived, not waited for now: waiting was a
                # round trip, and a switch to Redis and back, per commit.
                if self._reply_due:
                    self._reply_due = False
                    connection.read_response()
                connection.send_command("PUBLISH", f"{self.prefix}__group__{group}", payload)
                self._reply_due = True
            except (redis.RedisError, OSError) as exc:
                self._drop_connection()
                self.quiet_until = time.monotonic() + QUIET_SECONDS
                log.warning("could not publish to %s (quiet for %s s): %s", group, QUIET_SECONDS, exc)
                return False
        return True

    def _connected(self) -> redis.Connection:
        # A forked worker child starts its own; the parent's stays the parent's.
        if self._connection is None or self._pid != os.getpid():
            self._connection = self.connection_class(**self.options)
            self._pid = os.getpid()
            self._reply_due = False
        return self._connection

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.disconnect()
        self._connection = None
        self._reply_due = False


_publisher: PubSubPublisher | None = None
_checked = False
_lock = threading.Lock()


def pubsub_publisher() -> PubSubPublisher | None:
    """The publisher for the default channel layer, or None when that is not
    a RedisPubSubChannelLayer on one Redis URL (the in-memory layer, several
    shards, a host given as a dict): those are sent through the layer."""
    global _publisher, _checked
    if _checked:
        return _publisher
    with _lock:
        if not _checked:
            _publisher = _build()
            _checked = True
    return _publisher


def _build() -> PubSubPublisher | None:
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        return None
    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    hosts = config.get("hosts") or []
    if len(hosts) != 1 or not isinstance(hosts[0], str):
        return None
    return PubSubPublisher(layer, hosts[0], config.get("prefix", "asgi"))


@receiver(setting_changed)
def reset(setting: str = "CHANNEL_LAYERS", **kwargs) -> None:
    """Forget the publisher when the channel layers change (tests)."""
    global _publisher, _checked
    if setting == "CHANNEL_LAYERS":
        with _lock:
            _publisher, _checked = None, False
