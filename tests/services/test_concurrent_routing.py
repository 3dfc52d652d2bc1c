"""The one-place invariant on PostgreSQL under concurrency: every message is
drained once, dropped once (with one message_dropped event) or still unread,
whether threads hammer one run's router or two worker processes run several
chatty runs at once.

`make test` runs this module in its services pass (DATABASE_URL and REDIS_URL
set); under CI=true a missing service is a failure, never a skip.
"""

from __future__ import annotations

import random
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection, transaction

from agents.router import COORDINATOR, DoubleDrainError, DropReason, RouterMessage
from runs import tasks
from runs.actions import do_create_run, router_for
from runs.models import Message, Run, Step
from runs.store.mailboxes import DjangoMailboxStore
from tests.conftest import register, wait_for_run

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
DRAIN_EVENTS = ("agent_inbox_drain", "coordinator_inbox_message")


def assert_every_message_in_one_place(run: Run, *, unread_allowed: bool) -> dict[str, int]:
    """The invariants, read back from the database; returns the tallies."""
    run.refresh_from_db()
    rows = list(Message.objects.filter(run=run).values("message_id", "recipient", "drained", "drop_reason"))
    ids = [row["message_id"] for row in rows]
    assert len(set(ids)) == len(ids)
    # Every id handed out was stored or dropped: the numbers are 1..N, no gaps.
    numbers = sorted(int(mid.rsplit("-", 1)[1]) for mid in ids)
    assert numbers == list(range(1, run.last_message_no + 1))

    both = [row["message_id"] for row in rows if row["drained"] and row["drop_reason"]]
    assert both == [], f"drained and dropped: {both}"
    drained = {row["message_id"] for row in rows if row["drained"]}
    dropped = {row["message_id"]: row["drop_reason"] for row in rows if row["drop_reason"]}
    unread = [row for row in rows if not row["drained"] and not row["drop_reason"]]
    if not unread_allowed:
        assert unread == [], f"left unread: {unread}"

    events = list(run.events.order_by("seq").values("seq", "type", "step_id", "data"))
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert run.last_event_seq == len(seqs)

    drop_events = [event for event in events if event["type"] == "message_dropped"]
    assert len(drop_events) == len(dropped)
    assert {e["data"]["message_id"]: e["data"]["reason"] for e in drop_events} == dropped

    drain_events = [event for event in events if event["type"] in DRAIN_EVENTS]
    drain_ids = [event["data"]["message_id"] for event in drain_events]
    assert len(set(drain_ids)) == len(drain_ids), "a message was drained twice"
    assert set(drain_ids) == drained
    recipients = {row["message_id"]: row["recipient"] for row in rows}
    for event in drain_events:
        assert event["step_id"] == recipients[event["data"]["message_id"]]
    return {"messages": len(rows), "drained": len(drained), "dropped": len(dropped), "unread": len(unread)}


# -- threads on one run ----------------------------------------------------

STEPS = [f"s{n}" for n in range(1, 7)]
RESUMABLE = {"s5", "s6"}  # completed, with a transcript: a forward resumes them
THREADS = 8
OPERATIONS = 50
CAP = 3


@pytest.fixture
def crowded_run(monkeypatch, settings):
    """A running run with six step mailboxes and no worker: wakes and resumes
    that would be enqueued after commit go nowhere."""
    settings.ZENWEB_MAX_MAILBOX_SIZE = CAP
    monkeypatch.setattr(tasks.wake_coordinator, "delay", lambda *args, **kwargs: None)
    monkeypatch.setattr(tasks.resume_step, "delay", lambda *args, **kwargs: None)
    run = Run.objects.create(workflow=register("relay"), status=Run.Status.RUNNING, inputs={"subject": "x"})
    Step.objects.create(
        run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR, status=Step.Status.RUNNING
    )
    for position, step_id in enumerate(STEPS, start=1):
        done = step_id in RESUMABLE
        Step.objects.create(
            run=run,
            step_id=step_id,
            agent="sender",
            position=position,
            status=Step.Status.COMPLETED if done else Step.Status.RUNNING,
            transcript=[{"role": "assistant", "content": "done"}] if done else [],
        )
    return run


class Worker(threading.Thread):
    """~50 random router operations, each in its own transaction, as the
    actions do. A drain sometimes takes only what an earlier peek showed,
    as a turn drains what its model was shown before it answered."""

    def __init__(self, run_id: int, seed: int, start_line: threading.Barrier) -> None:
        super().__init__(name=f"router-{seed}")
        self.run_id = run_id
        self.rng = random.Random(seed)
        self.start_line = start_line
        self.results: dict[str, str] = {}
        self.drained: list[str] = []
        self.double_drains = 0
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            self.start_line.wait()
            peeks: dict[str, list[RouterMessage]] = {}
            closes = 0
            for _ in range(OPERATIONS):
                action = self.rng.choice(["send", "send", "forward", "forward", "drain", "drain", "peek", "close"])
                if action == "close" and closes >= 2:
                    action = "drain"
                closes += action == "close"
                self.operate(action, peeks)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.errors.append(exc)
        finally:
            connection.close()

    def operate(self, action: str, peeks: dict[str, list[RouterMessage]]) -> None:
        rng = self.rng
        if action == "peek":
            mailbox = rng.choice([*STEPS, COORDINATOR])
            peeks[mailbox] = DjangoMailboxStore(self.run_id).unread(mailbox)
            return
        try:
            with transaction.atomic():
                router = router_for(self.run_id)
                if action == "send":
                    result = router.send(rng.choice(STEPS), f"{self.name} says hi")
                    self.results[result.message_id] = result.text
                elif action == "forward":
                    target = rng.choice([*STEPS, "ghost", COORDINATOR])
                    kind = rng.choice(["info", "context_update", "shout", None])
                    result = router.forward(target, f"{self.name} forwards", kind)
                    self.results[result.message_id] = result.text
                elif action == "drain":
                    mailbox = rng.choice([*STEPS, COORDINATOR])
                    only = peeks.pop(mailbox, None) if rng.random() < 0.7 else None
                    drained = router.drain(mailbox, only=only)
                    # Counted only once the transaction commits, below.
                    pending = [message.message_id for message in drained]
                else:
                    router.close(rng.choice(STEPS), DropReason.TARGET_TERMINAL)
        except DoubleDrainError:
            # The transaction rolled back: nothing was delivered twice.
            self.double_drains += 1
            return
        if action == "drain":
            self.drained += pending


def test_it_keeps_every_message_in_one_place_under_concurrent_routing(crowded_run):
    start_line = threading.Barrier(THREADS)
    workers = [Worker(crowded_run.pk, seed, start_line) for seed in range(THREADS)]

    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert not any(worker.is_alive() for worker in workers)
    errors = [error for worker in workers for error in worker.errors]
    assert errors == [], errors
    tally = assert_every_message_in_one_place(crowded_run, unread_allowed=True)
    assert tally["messages"] > THREADS * OPERATIONS // 4  # the threads did route

    rows = {row.message_id: row for row in Message.objects.filter(run=crowded_run)}
    results = {mid: text for worker in workers for mid, text in worker.results.items()}
    # Every result the threads saw is what the database kept.
    assert set(results) == set(rows)
    for message_id, text in results.items():
        if text.startswith("dropped: "):
            assert text.split(". ")[0] == f"dropped: {rows[message_id].drop_reason}"
            assert rows[message_id].drained is None
        else:
            assert text == f"queued: {message_id}"
    drained = [mid for worker in workers for mid in worker.drained]
    assert len(set(drained)) == len(drained)
    assert set(drained) == {mid for mid, row in rows.items() if row.drained}

    steps = {step.step_id: step for step in Step.objects.filter(run=crowded_run)}
    unread = Counter(row.recipient for row in rows.values() if not row.drained and not row.drop_reason)
    for mailbox, count in unread.items():
        assert count <= CAP, f"{mailbox} holds {count} unread, over the cap of {CAP}"
        # A closed mailbox keeps nothing unread, unless a resume reopened it.
        step = steps[mailbox]
        assert not step.mailbox_closed_reason or step.resuming, f"{mailbox} is closed with {count} unread"


def run_threads(*targets) -> None:
    """Run each target in its own thread, all released at once; re-raise
    the first error a thread met."""
    start_line = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def body(target) -> None:
        try:
            start_line.wait()
            target()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=body, args=(target,)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]


def test_it_drops_what_steps_send_while_the_coordinator_mailbox_closes(monkeypatch):
    """The coordinator's mailbox closes at its wake cap while steps are still
    sending: each send lands before the close (and drops with it) or after
    (and drops at once); none stays unread in the closed mailbox, where the
    coordinator would wait for it forever."""
    monkeypatch.setattr(tasks.wake_coordinator, "delay", lambda *args, **kwargs: None)
    workflow = register("relay")
    for _ in range(12):
        run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, inputs={"subject": "x"})
        Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
        Step.objects.create(run=run, step_id="first", agent="sender", status=Step.Status.RUNNING)

        def send(run_id=run.pk) -> None:
            for _ in range(5):
                with transaction.atomic():
                    router_for(run_id).send("first", "still going")

        def close(run_id=run.pk) -> None:
            with transaction.atomic():
                router_for(run_id).close(COORDINATOR, DropReason.MAX_WAKE_CYCLES)

        run_threads(send, send, send, send, close)

        assert_every_message_in_one_place(run, unread_allowed=False)
        assert set(run.messages.values_list("drop_reason", flat=True)) == {"max-wake-cycles"}


def test_it_refuses_to_drain_what_a_close_dropped_after_the_model_saw_it(crowded_run):
    router = router_for(crowded_run.pk)
    with transaction.atomic():
        router.forward("s1", "read me")
    # A turn shows its model the inbox, outside any transaction...
    shown = DjangoMailboxStore(crowded_run.pk).unread("s1")
    with transaction.atomic():
        router.close("s1", DropReason.TARGET_TERMINAL)

    # ...and drains what it showed when it records the answer.
    with pytest.raises(DoubleDrainError, match="msg-fwd-1"), transaction.atomic():
        router.drain("s1", only=shown)

    row = Message.objects.get(run=crowded_run, message_id="msg-fwd-1")
    assert (row.drop_reason, row.drained) == ("target-terminal", None)
    assert list(crowded_run.events.values_list("type", flat=True)) == ["message_sent", "message_dropped"]


# -- two worker processes, several runs ----------------------------------


TURN_DONE = re.compile(r"Task runs\.tasks\.run_step_turn\[[0-9a-f-]+\] succeeded")


def test_it_keeps_every_message_in_one_place_across_two_worker_processes(two_workers):
    workflow = register("concurrency/crowd")

    runs = [do_create_run(workflow, {}) for _ in range(3)]
    runs = [wait_for_run(run, timeout=90) for run in runs]

    for run in runs:
        assert run.status == Run.Status.COMPLETED, run.error
        tally = assert_every_message_in_one_place(run, unread_allowed=False)
        # Each step sent five messages; forwards add more.
        assert tally["messages"] >= 8 * 5
        assert tally["drained"] and tally["dropped"]
        reasons = set(run.messages.exclude(drop_reason="").values_list("drop_reason", flat=True))
        assert "unknown-step" in reasons
    for log in two_workers:
        assert TURN_DONE.search(log.read_text()), f"{log.name} ran no step turn"
