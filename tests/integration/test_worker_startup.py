"""What a Celery worker's main process does before its pool forks: the token
encodings are loaded there, so prefork children share one copy instead of
each loading its own on its first turn (0.1 s and 40 MB apiece)."""

from __future__ import annotations

import os

import pytest
from celery.signals import worker_init

from agents.llm import tokens


@pytest.fixture
def no_encodings_loaded():
    tokens._load_encoding.cache_clear()
    yield
    tokens._load_encoding.cache_clear()


# Sent without a worker, Celery's Django fixup says so and does nothing more.
@pytest.mark.filterwarnings("ignore::celery.fixups.django.FixupWarning")
def test_it_loads_the_configured_models_encoding_before_the_pool_forks(no_encodings_loaded, monkeypatch):
    monkeypatch.setenv("ZENWEB_MODEL", "gpt-4o")
    import zenweb.celery  # noqa: F401 - connects the worker signals

    worker_init.send(sender=None)
    loaded = tokens._load_encoding.cache_info().currsize

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the pool's child: counting loads nothing new
        tokens.count_text("a first turn", "gpt-4o")
        tokens.count_text("a first turn", None)
        os.write(write, str(tokens._load_encoding.cache_info().misses).encode())
        os._exit(0)
    os.close(write)
    misses_in_child = int(os.read(read, 32))
    os.waitpid(pid, 0)

    assert {tokens.encoding_name("gpt-4o"), tokens.DEFAULT_ENCODING} == {"o200k_base", "cl100k_base"}
    assert loaded == 2
    assert misses_in_child == 2  # the two loads the main process made, none since
