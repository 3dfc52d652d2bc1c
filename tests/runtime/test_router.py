"""MessageRouter: hub-and-spoke delivery, drops and the one-place invariant."""

from __future__ import annotations

import random

import pytest

from agents.events import ListSink
from agents.router import (
    COORDINATOR,
    DoubleDrainError,
    DropReason,
    InMemoryMailboxStore,
    MailboxStoreError,
    MessageRouter,
    MessageType,
)


def make_router(*steps: str) -> tuple[MessageRouter, InMemoryMailboxStore, ListSink]:
    store = InMemoryMailboxStore()
    sink = ListSink()
    router = MessageRouter(store, sink)
    for step in steps:
        router.register(step)
    return router, store, sink


def test_it_queues_a_step_message_unread_in_the_coordinator_mailbox():
    router, store, sink = make_router("research")

    result = router.send("research", "found three sources")

    assert result.status == "queued"
    assert result.text == "queued: msg-send-1"
    [message] = store.unread(COORDINATOR)
    assert message.message_id == "msg-send-1"
    assert (message.sender, message.recipient, message.type) == ("research", COORDINATOR, MessageType.INFO)
    assert message.content == "found three sources"
    assert sink.types() == ["message_sent"]
    [event] = sink.events
    assert event.step_id == "research"
    assert event.data["from"] == "research"
    assert event.data["to"] == COORDINATOR
    assert event.data["msg_type"] == "info"
    assert event.data["message_id"] == "msg-send-1"


def test_it_numbers_messages_across_sends_and_forwards():
    router, _, _ = make_router("research")

    assert router.send("research", "one").text == "queued: msg-send-1"
    assert router.forward("research", "two").text == "queued: msg-fwd-2"
    assert router.send("research", "three").text == "queued: msg-send-3"


def test_it_forwards_to_a_registered_step_and_drains_it_once():
    router, store, sink = make_router("writer")

    first = router.forward("writer", "focus on tides")
    second = router.forward("writer", "and on moons")

    assert first.text == "queued: msg-fwd-1"
    assert second.text == "queued: msg-fwd-2"
    assert sink.types() == ["message_sent", "message_sent"]
    assert [e.data["to"] for e in sink.events] == ["writer", "writer"]
    assert [e.data["from"] for e in sink.events] == [COORDINATOR, COORDINATOR]

    drained = router.drain("writer")

    assert [m.message_id for m in drained] == ["msg-fwd-1", "msg-fwd-2"]
    assert [m.content for m in drained] == ["focus on tides", "and on moons"]
    drains = sink.of_type("agent_inbox_drain")
    assert [e.data["message_id"] for e in drains] == ["msg-fwd-1", "msg-fwd-2"]
    assert all(e.step_id == "writer" and e.data["from"] == COORDINATOR for e in drains)
    assert store.unread("writer") == []

    events_before = len(sink.events)
    assert router.drain("writer") == []
    assert len(sink.events) == events_before


def test_it_emits_a_coordinator_inbox_message_per_drained_message():
    router, _, sink = make_router("research", "writer")
    router.send("research", "notes ready")
    router.send("writer", "need notes")

    drained = router.drain(COORDINATOR)

    assert [m.sender for m in drained] == ["research", "writer"]
    inbox_events = sink.of_type("coordinator_inbox_message")
    assert [e.data["from"] for e in inbox_events] == ["research", "writer"]
    assert [e.data["content"] for e in inbox_events] == ["notes ready", "need notes"]
    assert all(e.step_id == COORDINATOR and e.data["msg_type"] == "info" for e in inbox_events)
    assert sink.of_type("agent_inbox_drain") == []


def test_it_drops_a_forward_to_an_unknown_step_listing_the_sorted_step_ids():
    router, store, sink = make_router("writer", "alpha", "research")

    result = router.forward("ghost", "hello?", "context_update")

    assert result.status == "dropped"
    assert result.reason == DropReason.UNKNOWN_STEP
    assert result.text.startswith("dropped: unknown-step")
    assert "[alpha, research, writer]" in result.text
    assert "Retry forward_to_agent" in result.text
    assert "narrate" in result.text

    [event] = sink.events
    assert event.type == "message_dropped"
    assert event.data["reason"] == "unknown-step"
    assert event.data["from"] == COORDINATOR
    assert event.data["to"] == "ghost"
    assert event.data["msg_type"] == "context_update"
    assert event.data["message_id"] == result.message_id

    [(dropped, reason)] = store.drops
    assert dropped.message_id == result.message_id
    assert reason == DropReason.UNKNOWN_STEP
    for mailbox in ["ghost", COORDINATOR, "writer", "alpha", "research"]:
        assert store.unread(mailbox) == []


def test_it_treats_a_forward_to_the_coordinator_as_an_unknown_step():
    router, store, sink = make_router("writer")

    result = router.forward(COORDINATOR, "note to self")

    assert result.text.startswith("dropped: unknown-step")
    assert "[writer]" in result.text
    assert sink.types() == ["message_dropped"]
    assert store.unread(COORDINATOR) == []


def test_it_drops_a_forward_to_a_closed_mailbox_as_target_terminal():
    router, store, sink = make_router("writer")
    assert router.close("writer") == 0
    assert sink.events == []

    result = router.forward("writer", "too late")

    assert result.text == "dropped: target-terminal"
    [event] = sink.events
    assert event.type == "message_dropped"
    assert event.data["reason"] == "target-terminal"
    assert event.data["to"] == "writer"
    assert [reason for _, reason in store.drops] == [DropReason.TARGET_TERMINAL]
    assert store.unread("writer") == []


def test_it_drops_every_unread_message_when_a_mailbox_closes():
    router, store, sink = make_router("writer")
    sent = [router.forward("writer", f"note {n}") for n in range(3)]
    sink.events.clear()

    assert router.close("writer") == 3

    drops = sink.of_type("message_dropped")
    assert len(sink.events) == 3
    assert [e.data["message_id"] for e in drops] == [r.message_id for r in sent]
    assert {e.data["reason"] for e in drops} == {"target-terminal"}
    assert [(m.message_id, reason) for m, reason in store.drops] == [
        (r.message_id, DropReason.TARGET_TERMINAL) for r in sent
    ]

    assert router.drain("writer") == []
    assert router.close("writer") == 0
    assert len(sink.events) == 3


def test_it_keeps_messages_already_drained_out_of_the_close_drops():
    router, store, sink = make_router("writer")
    router.forward("writer", "read this")
    router.drain("writer")
    router.forward("writer", "never read")

    assert router.close("writer") == 1

    [(message, _)] = store.drops
    assert message.content == "never read"


def test_it_drops_everything_as_workflow_cancelled_after_cancellation():
    router, store, sink = make_router("writer", "research")
    router.forward("research", "queued before the cancel")
    sink.events.clear()
    store.cancelled = True

    sent = router.send("writer", "anyone there?")
    forwarded = router.forward("writer", "stop", "cancel")

    assert sent.text == "dropped: workflow-cancelled"
    assert forwarded.text == "dropped: workflow-cancelled"
    assert [e.data["reason"] for e in sink.of_type("message_dropped")] == ["workflow-cancelled"] * 2
    assert len(sink.events) == 2
    assert store.unread(COORDINATOR) == []
    assert store.unread("writer") == []

    # Closing after a cancel says why the run ended, not that the step did.
    assert router.close("research", DropReason.TARGET_TERMINAL) == 1
    assert len(sink.events) == 3
    assert sink.events[-1].data["reason"] == "workflow-cancelled"
    assert store.drops[-1][1] == DropReason.WORKFLOW_CANCELLED


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("info", MessageType.INFO),
        ("context_update", MessageType.CONTEXT_UPDATE),
        ("cancel", MessageType.CANCEL),
        ("shout", MessageType.INFO),
        ("", MessageType.INFO),
        (None, MessageType.INFO),
    ],
)
def test_it_keeps_known_kinds_and_falls_back_to_info(kind, expected):
    router, _, sink = make_router("writer")

    router.forward("writer", "hello", kind)

    [message] = router.drain("writer")
    assert message.type == expected
    assert sink.of_type("message_sent")[0].data["msg_type"] == str(expected)


def test_it_refuses_to_drain_a_message_twice():
    router, _, sink = make_router("writer")
    router.forward("writer", "once only")
    [message] = router.store.unread("writer")

    assert router.drain("writer", only=[message]) == [message]
    events_before = list(sink.events)

    with pytest.raises(DoubleDrainError, match="msg-fwd-1"):
        router.drain("writer", only=[message])

    assert sink.events == events_before
    assert len(sink.of_type("agent_inbox_drain")) == 1


def test_it_drains_only_the_messages_it_is_given():
    router, store, _ = make_router("writer")
    router.forward("writer", "shown")
    shown = store.unread("writer")
    router.forward("writer", "arrived later")

    assert router.drain("writer", only=shown) == shown
    assert [m.content for m in store.unread("writer")] == ["arrived later"]


@pytest.mark.parametrize("cancel_at", [None, 200])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_stores_or_drops_every_message_exactly_once(seed, cancel_at):
    steps = ["write", "research", "edit", "review"]
    router, store, sink = make_router(*steps)
    rng = random.Random(seed)
    issued: list[str] = []
    dropped_results: list[str] = []
    drained: list[str] = []

    for n in range(300):
        if n == cancel_at:
            store.cancelled = True
        action = rng.choice(["send", "send", "forward", "forward", "drain", "close"])
        if action == "send":
            result = router.send(rng.choice(steps), f"send {n}")
        elif action == "forward":
            result = router.forward(rng.choice([*steps, "ghost", COORDINATOR]), f"fwd {n}", "info")
        elif action == "drain":
            mailbox = rng.choice([*steps, COORDINATOR])
            unread = store.unread(mailbox)
            # Sometimes a model is shown only the oldest part of its inbox.
            shown = unread[: rng.randint(0, len(unread))] if rng.random() < 0.5 else None
            drained += [m.message_id for m in router.drain(mailbox, only=shown)]
            continue
        else:
            router.close(rng.choice(steps))
            continue
        issued.append(result.message_id)
        if result.status == "dropped":
            dropped_results.append(result.message_id)

    for mailbox in [*steps, COORDINATOR]:
        router.close(mailbox)

    drop_ids = [m.message_id for m, _ in store.drops]
    assert len(set(issued)) == len(issued)
    assert sorted(drained + drop_ids) == sorted(issued)
    assert set(dropped_results) <= set(drop_ids)
    drop_events = sink.of_type("message_dropped")
    assert len(drop_events) == len(store.drops)
    assert [e.data["message_id"] for e in drop_events] == drop_ids
    assert [e.data["reason"] for e in drop_events] == [str(reason) for _, reason in store.drops]
    assert len(sink.of_type("message_sent")) == len(issued) - len(dropped_results)
    drain_events = sink.of_type("agent_inbox_drain") + sink.of_type("coordinator_inbox_message")
    assert sorted(e.data["message_id"] for e in drain_events) == sorted(drained)


def test_it_drops_every_forward_after_cancel_as_workflow_cancelled_even_to_unknown_steps():
    store = InMemoryMailboxStore()
    sink = ListSink()
    router = MessageRouter(store, sink)
    store.cancelled = True

    result = router.forward("nobody", "hello")

    assert result.text == "dropped: workflow-cancelled"
    assert [e.data["reason"] for e in sink.of_type("message_dropped")] == ["workflow-cancelled"]


def test_it_drops_unread_messages_without_closing_the_mailbox():
    router, store, sink = make_router("writer")
    router.forward("writer", "one")

    assert router.drop_unread("writer", DropReason.TARGET_TERMINAL) == 1

    assert [e.data["reason"] for e in sink.of_type("message_dropped")] == ["target-terminal"]
    assert store.unread("writer") == []
    assert router.forward("writer", "two").text.startswith("queued:")


class FailingStore(InMemoryMailboxStore):
    def append(self, message):
        raise MailboxStoreError("disk full")


def test_it_drops_as_resolver_error_when_the_store_fails():
    store, sink = FailingStore(), ListSink()
    router = MessageRouter(store, sink)
    router.register("writer")

    result = router.forward("writer", "hello")

    assert result.text == "dropped: resolver-error. the mailbox store failed: disk full"
    assert [e.data["reason"] for e in sink.of_type("message_dropped")] == ["resolver-error"]
    assert [reason for _, reason in store.drops] == [DropReason.RESOLVER_ERROR]


def test_it_drops_as_resolver_error_when_the_resolver_raises():
    def broken(target):
        raise LookupError("catalog unavailable")

    store, sink = InMemoryMailboxStore(), ListSink()
    router = MessageRouter(store, sink, resolver=broken)

    result = router.forward("draft", "hello")

    assert result.text == "dropped: resolver-error. cannot resolve 'draft': catalog unavailable"
    assert len(sink.of_type("message_dropped")) == 1
