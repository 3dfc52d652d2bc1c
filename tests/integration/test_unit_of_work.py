"""A turn's messages held and written together (runs/store/unit_of_work.py):
numbered in the order they were routed, without gaps, stored when the block
ends; seen by a drain or close inside the block; counted against the
mailbox cap while held; forgotten with a savepoint that rolls back (for a
held tool's block, one taken only if it reached the database), or a block
that raises; the coordinator woken once. On SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, transaction

from agents.events import Event as RuntimeEvent
from agents.router import COORDINATOR, DropReason, MessageRouter
from runs.actions import router_for
from runs.models import Run
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def _turn(run: Run) -> Iterator[UnitOfWork]:
    """A turn's frame: the run locked, its events and messages held."""
    with transaction.atomic():
        store().lock_run(run.pk)
        with UnitOfWork(run.pk) as uow:
            yield uow


def _stored(run: Run) -> list[tuple[str, str, str]]:
    return list(run.messages.order_by("id").values_list("message_id", "recipient", "drop_reason"))


def test_it_stores_a_blocks_messages_when_it_ends_numbered_in_routing_order(two_step_run):
    run = two_step_run
    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        results = [router.send("s1", "one"), router.forward("s2", "two"), router.send("s2", "three")]
        # Another router of the same unit of work: held too.
        assert MessageRouter(uow.mailboxes, uow.sink).forward("s1", "four").text == ("queued: msg-fwd-4")
        assert not run.messages.exists()  # held until the block ends

    assert [r.text for r in results] == ["queued: msg-send-1", "queued: msg-fwd-2", "queued: msg-send-3"]
    assert _stored(run) == [
        ("msg-send-1", COORDINATOR, ""),
        ("msg-fwd-2", "s2", ""),
        ("msg-send-3", COORDINATOR, ""),
        ("msg-fwd-4", "s1", ""),
    ]
    sent = run.events.filter(type="message_sent").order_by("seq")
    assert [e.data["message_id"] for e in sent] == ["msg-send-1", "msg-fwd-2", "msg-send-3", "msg-fwd-4"]
    run.refresh_from_db()
    assert run.last_message_no == 4
    assert run.wake_requests == 2  # one per message for the coordinator

    with _turn(run) as uow:
        assert router_for(run.pk, uow=uow).forward("s1", "next turn").text == "queued: msg-fwd-5"


def test_a_drain_inside_the_block_reads_the_held_messages(two_step_run):
    run = two_step_run
    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        router.send("s1", "for the coordinator")
        router.send("s2", "and another")
        drained = router.drain(COORDINATOR)
        assert [m.message_id for m in drained] == ["msg-send-1", "msg-send-2"]
        router.send("s1", "after the drain")

    unread = dict(run.messages.values_list("message_id", "drained"))
    assert unread["msg-send-1"] is not None and unread["msg-send-2"] is not None
    assert unread["msg-send-3"] is None


def test_a_close_inside_the_block_drops_what_the_block_held_for_it(two_step_run):
    run = two_step_run
    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        router.forward("s1", "will be dropped")
        assert router.close("s1") == 1
        late = router.forward("s1", "after the close")

    assert (late.status, late.reason) == ("dropped", DropReason.TARGET_TERMINAL)
    assert _stored(run) == [
        ("msg-fwd-1", "s1", str(DropReason.TARGET_TERMINAL)),
        ("msg-fwd-2", "s1", str(DropReason.TARGET_TERMINAL)),
    ]


def test_held_messages_count_against_the_mailbox_cap(two_step_run):
    run = two_step_run
    with _turn(run) as uow:
        router = MessageRouter(uow.mailboxes, uow.sink, max_mailbox_size=2)
        results = [router.forward("s1", f"note {n}") for n in range(3)]

    assert [r.status for r in results] == ["queued", "queued", "dropped"]
    assert results[2].reason == DropReason.MAILBOX_FULL
    assert run.messages.filter(recipient="s1", drop_reason="").count() == 2
    assert run.events.filter(type="message_dropped", data__reason=str(DropReason.MAILBOX_FULL)).count() == 1


@pytest.mark.parametrize("block", ["savepoint", "undoable"])
def test_a_savepoint_that_rolls_back_takes_its_held_messages_and_their_numbers(two_step_run, block):
    # undoable (a held tool's block) takes its savepoint when the drain
    # reaches the database, and rolls back to it as savepoint does.
    run = two_step_run
    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        router.forward("s1", "kept")
        with pytest.raises(RuntimeError), getattr(uow, block)():
            router.forward("s2", "lost with the tool")
            router.drain("s1")  # writes the held rows inside the savepoint: undone with it
            with transaction.atomic(savepoint=False):  # as the mailbox store's statements fail
                raise RuntimeError("the tool broke")
        router.forward("s2", "kept too")

    assert _stored(run) == [("msg-fwd-1", "s1", ""), ("msg-fwd-2", "s2", "")]
    assert run.messages.get(message_id="msg-fwd-1").drained is None  # the drain was undone
    run.refresh_from_db()
    assert run.last_message_no == 2


def test_a_held_tools_block_that_stays_in_memory_sends_no_savepoint(two_step_run):
    run = two_step_run
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        router.forward("s1", "kept")
        with connection.execute_wrapper(record):
            with pytest.raises(RuntimeError), uow.undoable():
                router.forward("s2", "lost with the tool")
                uow.sink.emit(RuntimeEvent("coordinator_narration", COORDINATOR, {"text": "lost too"}))
                raise RuntimeError("the tool broke")
            with uow.undoable():
                router.forward("s2", "kept too")
        assert not [statement for statement in sent if "SAVEPOINT" in statement.upper()], sent

    assert _stored(run) == [("msg-fwd-1", "s1", ""), ("msg-fwd-2", "s2", "")]
    assert not run.events.filter(type="coordinator_narration").exists()
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # the forgotten event took no number


def test_a_block_that_raises_stores_nothing(two_step_run):
    run = two_step_run
    with pytest.raises(RuntimeError), _turn(run) as uow:
        router_for(run.pk, uow=uow).forward("s1", "never stored")
        raise RuntimeError("the turn broke")

    assert not run.messages.exists()
    run.refresh_from_db()
    assert run.last_message_no == 0
    with _turn(run) as uow:
        assert router_for(run.pk, uow=uow).forward("s1", "first for real").text == "queued: msg-fwd-1"


def test_a_block_outside_any_transaction_begins_its_own_and_commits_it_at_its_end(two_step_run):
    run = two_step_run
    with UnitOfWork(run.pk) as uow:
        router_for(run.pk, uow=uow).forward("s1", "kept")
        assert not run.messages.exists()  # held until the block ends

    assert _stored(run) == [("msg-fwd-1", "s1", "")]
    with pytest.raises(RuntimeError), UnitOfWork(run.pk) as uow:
        router_for(run.pk, uow=uow).forward("s1", "written, then rolled back")
        uow.flush()
        assert len(_stored(run)) == 2  # in the block's transaction
        raise RuntimeError("the action broke")

    assert _stored(run) == [("msg-fwd-1", "s1", "")]
    run.refresh_from_db()
    assert run.last_message_no == 1


def test_a_held_message_keeps_its_text_as_it_was_sent(two_step_run):
    # On PostgreSQL the block's messages travel as one JSON document: what
    # JSON escapes (quotes, backslashes, newlines, the six characters of a
    # written-out \u0000) comes back as it was, and long text is not cut.
    run = two_step_run
    texts = [
        'say "hi"\\ and \\\\ twice',
        "line one\nline two\ttab",
        "caf\u00e9 \U0001f600",
        "a \\u0000 b",
        "x" * 20_000,
    ]
    with _turn(run) as uow:
        router = router_for(run.pk, uow=uow)
        for text in texts:
            router.send("s1", text)

    assert list(run.messages.order_by("id").values_list("content", flat=True)) == texts


@pytest.mark.services
def test_a_block_that_takes_the_lock_sees_what_the_locks_last_holder_committed(pg_run):
    # UnitOfWork.lock takes the run's lock and reads the counter and
    # mailbox states in one round trip, as two statements: one statement
    # would read the states with a snapshot from before it waited for the
    # lock, and queue a message into a mailbox closed meanwhile.
    run = pg_run
    holding, release = threading.Event(), threading.Event()

    def first_turn() -> None:
        try:
            with _turn(run) as uow:
                router = router_for(run.pk, uow=uow)
                router.send("s1", "one")
                router.close("s2")
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    first = threading.Thread(target=first_turn)
    first.start()
    assert holding.wait(10)
    threading.Timer(0.5, release.set).start()  # commits while the block below waits
    with transaction.atomic(), UnitOfWork(run.pk) as uow:
        uow.lock()
        late = router_for(run.pk, uow=uow).forward("s2", "after the close")
        more = router_for(run.pk, uow=uow).send("s1", "two")
    first.join()

    assert (late.status, late.reason) == ("dropped", DropReason.TARGET_TERMINAL)
    assert more.text == "queued: msg-send-3"
    assert [m for m, _, _ in _stored(run)] == ["msg-send-1", "msg-fwd-2", "msg-send-3"]
