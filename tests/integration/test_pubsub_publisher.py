"""The synchronous publisher of dashboard notifications (runs/pubsub_publisher.py)
with Redis away: the commit that notifies goes on, and for a second no
commit waits on the dead server again (the dashboards' poll catches up)."""

from __future__ import annotations

import logging

from channels_redis.pubsub import RedisPubSubChannelLayer

from runs.pubsub_publisher import PubSubPublisher, pubsub_publisher

DEAD = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def test_it_gives_up_on_a_dead_redis_and_then_stays_quiet(caplog, monkeypatch):
    publisher = PubSubPublisher(RedisPubSubChannelLayer(hosts=[DEAD]), DEAD, "asgi")
    tries = []
    connected = publisher._connected
    monkeypatch.setattr(publisher, "_connected", lambda: tries.append(1) or connected())

    with caplog.at_level(logging.WARNING, logger="runs.pubsub_publisher"):
        assert publisher.group_send("run-1", {"type": "run.event", "seq": 1}) is False
        assert publisher.group_send("run-1", {"type": "run.event", "seq": 2}) is False

    assert len(tries) == 1
    assert "could not publish to run-1" in caplog.text


def test_the_embedded_layer_has_no_blocking_publisher():
    # The in-memory layer lives in daphne's process: its broadcasts go through the layer.
    assert pubsub_publisher() is None


def test_it_publishes_for_a_pubsub_layer_on_one_redis_url(settings):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [DEAD]}}
    }
    publisher = pubsub_publisher()
    assert publisher is not None and publisher.prefix == "asgi"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [DEAD, DEAD]},  # shards: sent through the layer
        }
    }
    assert pubsub_publisher() is None
