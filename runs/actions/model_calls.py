"""What a model call reports while it runs: its answer so far to the run's
pages (runs/partials.py), and each retry as a ``provider_retry`` event."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import transaction

from agents.events import Event as RuntimeEvent
from agents.events.run_events import ProviderRetry as ProviderRetryEvent
from agents.llm import PartialOutput, ProviderRetry
from runs import partials
from runs.store.unit_of_work import UnitOfWork


def do_record_provider_retry(run_id: int, step_id: str, retry: ProviderRetry) -> None:
    """Store one retry of a model call of ``step_id``: the status (None for
    a timeout or connection error), what the endpoint said (the provider
    redacted its key), which attempt failed and how long until the next."""
    data = ProviderRetryEvent(status=retry.status, message=retry.message[:1000], attempt=retry.attempt, wait=retry.wait)
    with transaction.atomic(), UnitOfWork(run_id) as uow:
        uow.sink.emit(RuntimeEvent.of(data, step_id))


@dataclass
class ModelCall:
    """The callbacks of one model call, passed to ``Provider.complete``."""

    run_id: int
    step_id: str
    streamed: bool = False

    def on_partial(self, partial: PartialOutput) -> None:
        self.streamed = True
        partials.publish(self.run_id, self.step_id, partial)

    def on_retry(self, retry: ProviderRetry) -> None:
        do_record_provider_retry(self.run_id, self.step_id, retry)

    @property
    def hooks(self) -> dict:
        return {"on_partial": self.on_partial, "on_retry": self.on_retry}


@contextlib.contextmanager
def model_call(run_id: int, step_id: str) -> Iterator[dict]:
    """``provider.complete(request, **hooks)`` inside this block reports to the
    run; when it ends, the kept partial goes (the turn stores the answer)."""
    call = ModelCall(run_id, step_id)
    try:
        yield call.hooks
    finally:
        # Only after a streamed answer: a scripted turn costs no cache trip.
        if call.streamed:
            partials.clear(run_id, step_id)
