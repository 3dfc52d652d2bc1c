"""MessageRouter under random interleavings of registrations, sends, forwards,
drains, closes and a cancel: every message ends in exactly one place (drained
once, or dropped once with one message_dropped event), and every sender's
result says which."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agents.events import ListSink
from agents.router import (
    COORDINATOR,
    DoubleDrainError,
    DropReason,
    MessageRouter,
    MessageType,
    RouterMessage,
    SendResult,
)
from tests.runtime.router_fakes import FakeResumer, FlakyStore, resolve

STEPS = ["alpha", "beta"]
MAILBOXES = [*STEPS, COORDINATOR]
# Forward targets no step has: "ghost" names nothing; with a resolver, "a" is
# alpha's bare id, "box" a container (rejected) and "boom" breaks the resolver.
UNKNOWN_TARGETS = ["ghost", "a", "box", "boom"]
SENDERS = [*STEPS, "ghost"]
# Unknown kinds fall back to info; a model may name "resume_reply" too.
KINDS = [None, "", "info", "cancel", "context_update", "resume_reply", "shout", "INFO"]
# Closing a finished step (target-terminal) is the common case, and the one a
# resumer may reopen: weight it, but let every other reason happen too.
CLOSE_REASONS = st.one_of(st.just(DropReason.TARGET_TERMINAL), st.sampled_from(DropReason))
# A resumer accepts (None) or refuses with a reason.
RESUME_ANSWERS = st.one_of(
    st.none(),
    st.sampled_from(
        [
            DropReason.TARGET_TERMINAL,
            DropReason.RESUME_SHUTDOWN,
            DropReason.NO_TRANSCRIPT,
            DropReason.TRANSCRIPT_TOO_LARGE,
            DropReason.MAX_WAKE_CYCLES,
        ]
    ),
)
# Now and then the store fails to keep a message.
STORE_FAILS = st.integers(0, 7).map(lambda n: n == 0)
DRAIN_EVENTS = ("agent_inbox_drain", "coordinator_inbox_message")

Outcome = tuple[str, DropReason | None]


def message_data(message: RouterMessage) -> dict[str, str]:
    return {
        "message_id": message.message_id,
        "from": message.sender,
        "to": message.recipient,
        "msg_type": str(message.type),
        "content": message.content,
    }


class Routing(RuleBasedStateMachine):
    """One router over an in-memory store, and the test's own account of what
    each message id handed out must have become."""

    @initialize(
        cap=st.one_of(st.just(1), st.sampled_from([0, 1, 2, 3])),
        with_resumer=st.booleans(),
        with_resolver=st.booleans(),
        steps=st.lists(st.sampled_from(STEPS), unique=True),
    )
    def start(self, cap: int, with_resumer: bool, with_resolver: bool, steps: list[str]) -> None:
        self.store = FlakyStore()
        self.sink = ListSink()
        self.resumer = FakeResumer(self.store, self.sink) if with_resumer else None
        self.router = MessageRouter(
            self.store,
            self.sink,
            max_mailbox_size=cap,
            resumer=self.resumer,
            resolver=resolve if with_resolver else None,
        )
        self.cap = cap
        self.issued: dict[str, SendResult] = {}
        self.drained: list[str] = []
        # Every message a peek ever showed, per mailbox: a turn drains what its
        # model was shown, which may be stale by the time it drains.
        self.shown: dict[str, dict[str, RouterMessage]] = {}
        self.texts = 0
        # Most runs register their steps up front; the register rule adds more.
        for step in steps:
            self.router.register(step)

    # -- what the store holds ---------------------------------------------

    def unread_ids(self) -> dict[str, str]:
        """Every unread message id, with the mailbox that holds it."""
        found: dict[str, str] = {}
        for mailbox in [*MAILBOXES, *UNKNOWN_TARGETS]:
            for message in self.store.unread(mailbox):
                assert message.message_id not in found, f"{message.message_id} is unread in two mailboxes"
                found[message.message_id] = mailbox
        return found

    def full(self, mailbox: str) -> bool:
        return bool(self.cap) and self.store.unread_count(mailbox) >= self.cap

    def expect_delivery(self, recipient: str, type_: MessageType, answer: DropReason | None, fails: bool) -> Outcome:
        """What delivering a message to ``recipient`` must give, judged from
        the store's state before the call."""
        if self.store.cancelled:
            return "dropped", DropReason.WORKFLOW_CANCELLED
        closed = self.store.closed_reason(recipient)
        if closed is not None:
            # Only a step can be resumed, never the coordinator.
            resumable = recipient != COORDINATOR and type_ != MessageType.RESUME_REPLY
            if closed == DropReason.TARGET_TERMINAL and self.resumer and resumable:
                if self.full(recipient):
                    return "dropped", DropReason.MAILBOX_FULL
                return ("queued", None) if answer is None else ("dropped", answer)
            return "dropped", closed
        if self.full(recipient):
            return "dropped", DropReason.MAILBOX_FULL
        if fails:
            return "dropped", DropReason.RESOLVER_ERROR
        return "queued", None

    def arm(self, answer: DropReason | None, fails: bool) -> None:
        if self.resumer:
            self.resumer.answer = answer
        self.store.fail_next_append = fails

    def text(self) -> str:
        self.texts += 1
        return f"text {self.texts}"

    def check_result(
        self,
        result: SendResult,
        expected: Outcome,
        message: tuple[str, str, MessageType, str],
        before: tuple[int, int, int],
    ) -> None:
        """``message`` is (sender, recipient, type, content); ``before`` the
        counts of drops, events and resumer calls before the call."""
        drops_before, events_before, calls_before = before
        sender, recipient, type_, content = message
        new_drops = self.store.drops[drops_before:]
        new_events = self.sink.events[events_before:]
        assert (result.status, result.reason) == expected
        if self.store.cancelled:
            assert result.text == "dropped: workflow-cancelled"
        if result.status == "rejected":
            # Not a message: no id, nothing stored, nothing dropped.
            assert result.message_id == "" and result.text.startswith("rejected: ")
            assert new_drops == [] and new_events == []
            return
        assert result.message_id not in self.issued, f"{result.message_id} handed out twice"
        self.issued[result.message_id] = result
        if result.status == "queued":
            assert result.text == f"queued: {result.message_id}"
            assert new_drops == []
            [stored] = [m for m in self.store.unread(recipient) if m.message_id == result.message_id]
            assert (stored.sender, stored.recipient, stored.type, stored.content) == message
            assert [(e.type, e.step_id, e.data) for e in new_events] == [("message_sent", sender, message_data(stored))]
        else:
            assert result.text.split(". ")[0] == f"dropped: {result.reason}"
            [(dropped, reason)] = new_drops
            assert (dropped.message_id, reason) == (result.message_id, result.reason)
            assert (dropped.sender, dropped.recipient, dropped.type, dropped.content) == message
            assert [e.type for e in new_events] == ["message_dropped"]
        if self.resumer is not None:
            calls = self.resumer.calls[calls_before:]
            # A reply that a resume produced never resumes anything in turn.
            assert all(call.type != MessageType.RESUME_REPLY for call in calls)
            assert len(calls) <= 1

    def counts(self) -> tuple[int, int, int]:
        return len(self.store.drops), len(self.sink.events), len(self.resumer.calls) if self.resumer else 0

    # -- rules -------------------------------------------------------------

    @rule(step=st.sampled_from(STEPS))
    def register(self, step: str) -> None:
        self.router.register(step)

    @rule(
        sender=st.sampled_from(SENDERS),
        type_=st.sampled_from(MessageType),
        answer=RESUME_ANSWERS,
        fails=STORE_FAILS,
    )
    def send(self, sender: str, type_: MessageType, answer: DropReason | None, fails: bool) -> None:
        content = self.text()
        before = self.counts()
        expected = self.expect_delivery(COORDINATOR, type_, answer, fails)
        self.arm(answer, fails)

        result = self.router.send(sender, content, type_)

        self.store.fail_next_append = False
        self.check_result(result, expected, (sender, COORDINATOR, type_, content), before)

    @rule(
        to=st.sampled_from([*MAILBOXES, *UNKNOWN_TARGETS]),
        kind=st.sampled_from(KINDS),
        answer=RESUME_ANSWERS,
        fails=STORE_FAILS,
    )
    def forward(self, to: str, kind: str | None, answer: DropReason | None, fails: bool) -> None:
        content = self.text()
        type_ = MessageType.parse(kind)
        before = self.counts()
        registered = self.store.registered()
        target = to  # what the forward ends up addressed to
        expected: Outcome | None = None
        if self.store.cancelled:
            expected = ("dropped", DropReason.WORKFLOW_CANCELLED)
        elif to != COORDINATOR and to not in registered and self.router.resolver is not None:
            if to == "boom":
                expected = ("dropped", DropReason.RESOLVER_ERROR)
            elif to == "box":
                expected = ("rejected", None)
            elif to == "a":
                target = "alpha"
        unknown = expected is None and (target == COORDINATOR or target not in registered)
        if unknown:
            expected = ("dropped", DropReason.UNKNOWN_STEP)
        if expected is None:
            expected = self.expect_delivery(target, type_, answer, fails)
        self.arm(answer, fails)

        result = self.router.forward(to, content, kind)

        self.store.fail_next_append = False
        self.check_result(result, expected, (COORDINATOR, target, type_, content), before)
        if unknown:
            assert f"Registered steps: [{', '.join(registered)}]" in result.text

    @rule(mailbox=st.sampled_from(MAILBOXES))
    def peek(self, mailbox: str) -> None:
        for message in self.store.unread(mailbox):
            self.shown.setdefault(mailbox, {})[message.message_id] = message

    @rule(mailbox=st.sampled_from([*MAILBOXES, "ghost"]))
    def drain_all(self, mailbox: str) -> None:
        unread = self.store.unread(mailbox)
        events_before = len(self.sink.events)

        drained = self.router.drain(mailbox)

        assert drained == unread
        self.record_drain(mailbox, drained, events_before)
        assert self.store.unread(mailbox) == []

    @precondition(lambda self: self.shown)
    @rule(data=st.data())
    def drain_shown(self, data: st.DataObject) -> None:
        """A turn drains exactly what its model was shown."""
        mailbox = data.draw(st.sampled_from(sorted(self.shown)))
        seen = list(self.shown[mailbox].values())
        # Often everything it was ever shown: some of that is stale by now.
        shown = data.draw(st.one_of(st.just(seen), st.lists(st.sampled_from(seen), unique=True, min_size=1)))
        unread = {m.message_id for m in self.store.unread(mailbox)}
        stale = [m.message_id for m in shown if m.message_id not in unread]
        events_before = len(self.sink.events)
        unread_before = self.unread_ids()
        drops_before = len(self.store.drops)

        if stale:
            with pytest.raises(DoubleDrainError) as error:
                self.router.drain(mailbox, only=shown)

            assert all(message_id in str(error.value) for message_id in stale)
            # A refused drain delivers nothing and loses nothing.
            assert len(self.sink.events) == events_before
            assert len(self.store.drops) == drops_before
            assert self.unread_ids() == unread_before
            return

        drained = self.router.drain(mailbox, only=shown)

        assert drained == shown
        self.record_drain(mailbox, drained, events_before)
        assert {m.message_id for m in self.store.unread(mailbox)} == unread - {m.message_id for m in shown}

    def record_drain(self, mailbox: str, drained: list[RouterMessage], events_before: int) -> None:
        event_type = "coordinator_inbox_message" if mailbox == COORDINATOR else "agent_inbox_drain"
        events = self.sink.events[events_before:]
        assert [(e.type, e.step_id, e.data["message_id"], e.data["from"]) for e in events] == [
            (event_type, mailbox, m.message_id, m.sender) for m in drained
        ]
        self.drained += [m.message_id for m in drained]

    @rule(mailbox=st.sampled_from(MAILBOXES), reason=CLOSE_REASONS)
    def close(self, mailbox: str, reason: DropReason) -> None:
        already_closed = self.store.closed_reason(mailbox) is not None
        unread = self.store.unread(mailbox)
        drops_before = len(self.store.drops)
        # Closing after a cancel says why the run ended, not why the step did.
        effective = DropReason.WORKFLOW_CANCELLED if self.store.cancelled else reason

        count = self.router.close(mailbox, reason)

        new_drops = self.store.drops[drops_before:]
        if already_closed:
            assert count == 0 and new_drops == []
        else:
            assert count == len(unread)
            assert new_drops == [(m, effective) for m in unread]
            assert self.store.closed_reason(mailbox) == effective
            assert self.store.unread(mailbox) == []

    @rule(mailbox=st.sampled_from(MAILBOXES), reason=CLOSE_REASONS)
    def drop_unread(self, mailbox: str, reason: DropReason) -> None:
        unread = self.store.unread(mailbox)
        drops_before = len(self.store.drops)

        assert self.router.drop_unread(mailbox, reason) == len(unread)

        assert self.store.drops[drops_before:] == [(m, reason) for m in unread]
        assert self.store.unread(mailbox) == []

    @rule(now=st.integers(0, 3))
    def cancel(self, now: int) -> None:
        # Rarer than the other rules: after a cancel every send drops alike.
        if now == 0:
            self.store.cancelled = True

    # -- invariants, after every step ----------------------------------------

    @invariant()
    def every_message_is_in_exactly_one_place(self) -> None:
        drop_ids = [m.message_id for m, _ in self.store.drops]
        assert len(set(drop_ids)) == len(drop_ids), "a message was dropped twice"
        assert len(set(self.drained)) == len(self.drained), "a message was drained twice"
        places = [*drop_ids, *self.drained, *self.unread_ids()]
        assert sorted(places) == sorted(self.issued), "a message was lost, duplicated or made up"

    @invariant()
    def every_drop_has_exactly_one_matching_event(self) -> None:
        events = self.sink.of_type("message_dropped")
        assert len(events) == len(self.store.drops)
        for event, (message, reason) in zip(events, self.store.drops, strict=True):
            assert event.step_id == message.sender
            assert event.data == {
                "reason": str(reason),
                "from": message.sender,
                "to": message.recipient,
                "msg_type": str(message.type),
                "message_id": message.message_id,
            }

    @invariant()
    def every_result_matches_what_happened_to_its_message(self) -> None:
        drops = {m.message_id: reason for m, reason in self.store.drops}
        sent = [e.data["message_id"] for e in self.sink.of_type("message_sent")]
        assert len(set(sent)) == len(sent)
        assert set(sent) == {mid for mid, result in self.issued.items() if result.status == "queued"}
        for message_id, result in self.issued.items():
            if result.status == "dropped":
                assert drops[message_id] == result.reason

    @invariant()
    def every_drained_message_has_one_drain_event(self) -> None:
        drain_ids = [e.data["message_id"] for e in self.sink.events if e.type in DRAIN_EVENTS]
        assert sorted(drain_ids) == sorted(self.drained)

    @invariant()
    def no_mailbox_holds_more_than_its_cap(self) -> None:
        if self.cap:
            for mailbox in MAILBOXES:
                assert self.store.unread_count(mailbox) <= self.cap, mailbox

    def teardown(self) -> None:
        if not hasattr(self, "router"):
            return
        for mailbox in MAILBOXES:
            self.router.close(mailbox)
            # What a resume accepted outlives the closed mailbox until the
            # resume ends and drops what it did not read.
            self.router.drop_unread(mailbox, DropReason.TARGET_TERMINAL)
        assert self.unread_ids() == {}
        self.every_message_is_in_exactly_one_place()
        self.every_drop_has_exactly_one_matching_event()
        self.every_result_matches_what_happened_to_its_message()
        self.every_drained_message_has_one_drain_event()
        drop_ids = {m.message_id for m, _ in self.store.drops}
        assert drop_ids.isdisjoint(self.drained)
        assert drop_ids | set(self.drained) == set(self.issued)


TestRouting = Routing.TestCase
TestRouting.settings = settings(
    max_examples=500,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
