"""Answers while they are generated: a model's text (and tool-call arguments)
so far, sent to the run's open pages as ``run.partial`` group messages.

They are never stored as events: the provider reports an answer at most
every 100 ms, the page replaces what it showed, and the final answer is
stored once, as today, by the turn that records it.

The latest partial of each step is also kept in the "live" cache for
PARTIAL_TTL seconds, so that a page connecting mid-answer shows the text so
far (runs/consumers.py sends it on connect). A channel layer delivers but
keeps nothing to read back, hence the cache: Redis when the worker is a
process of its own, this process's memory embedded, where the worker threads
and daphne share it (zenweb/settings.py ``CACHES["live"]``).
"""

from __future__ import annotations

import json
import logging
import time

from django.core.cache import caches

from agents.llm import PartialOutput
from runs.store.events import send_to_dashboards

log = logging.getLogger(__name__)

PARTIAL_TYPE = "run.partial"
# Refreshed with each partial; a worker that died mid-answer leaves its
# text for no longer than this.
PARTIAL_TTL = 60
# Untrusted and unbounded: the page shows the last this many characters
# of the text, and of each call's arguments.
MAX_PARTIAL_CHARS = 16_000
MAX_PARTIAL_CALLS = 20


def _key(run_id: int, step_id: str) -> str:
    return f"partial:{run_id}:{step_id}"


def message(step_id: str, partial: PartialOutput) -> dict:
    """The group message (and the cached value) for ``partial``."""
    return {
        "type": PARTIAL_TYPE,
        "step": step_id,
        # The page keeps the newest: a partial read from the cache on connect
        # may arrive after a newer one came through the group.
        "at": time.time(),
        "text": _tail(partial.text),
        "cut": len(partial.text) > MAX_PARTIAL_CHARS,
        "calls": [
            {"name": call.name[:200], "arguments": _tail(call.arguments)}
            for call in partial.tool_calls[:MAX_PARTIAL_CALLS]
        ],
    }


def publish(run_id: int, step_id: str, partial: PartialOutput) -> None:
    """Show ``partial`` on the run's pages, and keep it for pages to come.
    Never raises: a page that misses a partial gets the final answer."""
    payload = message(step_id, partial)
    try:
        caches["live"].set(_key(run_id, step_id), payload, PARTIAL_TTL)
    except Exception as exc:  # noqa: BLE001 - Redis away: the answer itself is not at stake
        log.warning("could not keep the partial answer of %s in run %s: %s", step_id, run_id, exc)
    send_to_dashboards(run_id, payload, f"the partial answer of {step_id}")


def clear(run_id: int, step_id: str) -> None:
    """The answer is complete (or failed): pages that connect from now on
    read what the turn stored instead."""
    try:
        caches["live"].delete(_key(run_id, step_id))
    except Exception as exc:  # noqa: BLE001
        log.warning("could not drop the partial answer of %s in run %s: %s", step_id, run_id, exc)


def current(run_id: int, step_ids: list[str]) -> list[dict]:
    """The partials kept for these steps of a run, in ``step_ids``' order."""
    if not step_ids:
        return []
    try:
        found = caches["live"].get_many([_key(run_id, step_id) for step_id in step_ids])
    except Exception as exc:  # noqa: BLE001 - Redis away: the page still gets every event
        log.warning("could not read the partial answers of run %s: %s", run_id, exc)
        return []
    return [found[key] for step_id in step_ids if (key := _key(run_id, step_id)) in found]


def frame(payload: dict) -> str:
    """The websocket frame for a partial: JSON, which the page (runs/static/js/
    live.js) renders as text, never as HTML."""
    return json.dumps({"partial": {key: value for key, value in payload.items() if key != "type"}})


def _tail(text: str) -> str:
    return text[-MAX_PARTIAL_CHARS:]
