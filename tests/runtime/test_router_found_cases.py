"""What the router's interleaving machine (test_router_interleavings.py)
found, pinned down as examples."""

from __future__ import annotations

import pytest

from agents.events import ListSink
from agents.router import COORDINATOR, DoubleDrainError, DropReason, InMemoryMailboxStore, MessageRouter
from tests.runtime.router_fakes import FakeResumer, resolve


def test_it_leaves_fresh_messages_unread_when_it_refuses_a_drain():
    store, sink = InMemoryMailboxStore(), ListSink()
    router = MessageRouter(store, sink)
    router.send("alpha", "one")
    [first] = router.drain(COORDINATOR)
    router.send("alpha", "two")
    [second] = store.unread(COORDINATOR)

    with pytest.raises(DoubleDrainError, match=first.message_id):
        router.drain(COORDINATOR, only=[first, second])

    assert store.unread(COORDINATOR) == [second]
    assert router.drain(COORDINATOR) == [second]


def test_it_keeps_the_cap_for_a_mailbox_a_resume_reopened():
    store, sink = InMemoryMailboxStore(), ListSink()
    resumer = FakeResumer(store, sink)
    router = MessageRouter(store, sink, max_mailbox_size=1, resumer=resumer)
    router.register("alpha")
    router.close("alpha")

    assert router.forward("alpha", "one more turn?").text == "queued: msg-fwd-1"
    assert router.forward("alpha", "and another?").text == "dropped: mailbox-full"

    assert len(resumer.calls) == 1
    assert [m.content for m in store.unread("alpha")] == ["one more turn?"]


@pytest.mark.parametrize("target", ["boom", "box", "a"])
def test_it_drops_a_forward_after_cancel_without_resolving_its_target(target):
    store, sink = InMemoryMailboxStore(), ListSink()
    router = MessageRouter(store, sink, resolver=resolve)
    router.register("alpha")
    store.cancelled = True

    result = router.forward(target, "stop?")

    assert result.text == "dropped: workflow-cancelled"
    [(message, reason)] = store.drops
    assert (message.recipient, reason) == (target, DropReason.WORKFLOW_CANCELLED)
