"""Stand-ins for the router tests: a mailbox store that fails when told to,
a resumer that gives the answer the test chose, and a target resolver."""

from __future__ import annotations

from agents.events import ListSink
from agents.router import DropReason, InMemoryMailboxStore, MailboxStoreError, Rejection, RouterMessage


class FlakyStore(InMemoryMailboxStore):
    """Fails the next append when told to, as a database store may."""

    fail_next_append = False

    def append(self, message: RouterMessage) -> None:
        if self.fail_next_append:
            self.fail_next_append = False
            raise MailboxStoreError("disk full")
        super().append(message)


class FakeResumer:
    """Stands in for runs' Resumer: records each call and gives the answer
    the test chose. Accepting stores the message, as the real one does (the
    router then emits message_sent)."""

    def __init__(self, store: InMemoryMailboxStore, sink: ListSink) -> None:
        self.store = store
        self.sink = sink
        self.calls: list[RouterMessage] = []
        self.answer: DropReason | None = None

    def __call__(self, message: RouterMessage) -> DropReason | None:
        self.calls.append(message)
        if self.answer is None:
            # Past FlakyStore's failure switch, which is for the router's own append.
            InMemoryMailboxStore.append(self.store, message)
        return self.answer


def resolve(target: str) -> str | Rejection | None:
    if target == "boom":
        raise LookupError("catalog unavailable")
    if target == "box":
        return Rejection("rejected: box is a loop, not a step")
    return {"a": "alpha"}.get(target)
