"""Run-state writes: events commit with their change, tasks are safe to repeat."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agents.events import Event as RuntimeEvent
from runs import actions
from runs.models import Run, Step
from runs.store.events import run_group
from runs.store.unit_of_work import UnitPerEventSink
from tests.conftest import event_types, register


def start(django_capture_on_commit_callbacks, name: str = "relay", inputs=None) -> Run:
    # Keep the enqueued tasks: these tests drive the actions by hand.
    with django_capture_on_commit_callbacks(execute=False):
        run = actions.do_create_run(register(name), inputs or {"subject": "x"})
    with django_capture_on_commit_callbacks(execute=False):
        actions.do_start_run(run.pk)
    run.refresh_from_db()
    return run


def received(layer, channel: str, timeout: float = 5.0) -> dict:
    """The next message on ``channel``: a failure, not a hang, if none comes.
    The broadcast arrives from another thread's loop (runs/store/events.py), as a
    worker's does in the embedded layout (runs/channel_layers.py)."""

    async def receive() -> dict:
        return await asyncio.wait_for(layer.receive(channel), timeout)

    return async_to_sync(receive)()


def watched_run() -> tuple[Run, object, str]:
    """A run, and the channel layer and channel of a page that watches it."""
    layer = get_channel_layer()
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"})
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group(run.pk), channel)
    return run, layer, channel


@pytest.mark.django_db(transaction=True)
def test_it_broadcasts_an_event_only_after_its_transaction_commits():
    run, layer, channel = watched_run()

    def nothing_yet() -> bool:
        queue = layer.channels.get(channel)
        return queue is None or queue.empty()

    with transaction.atomic():
        UnitPerEventSink(run.pk).emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": "hi"}))
        assert nothing_yet()

    assert received(layer, channel) == {"type": "run.event", "seq": 1}


@pytest.mark.django_db(transaction=True)
def test_it_tells_dashboards_once_per_commit_with_the_newest_seq():
    run, layer, channel = watched_run()
    sink = UnitPerEventSink(run.pk)

    with pytest.raises(RuntimeError), transaction.atomic():
        sink.emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": "lost"}))
        raise RuntimeError("rolled back: nothing to tell")
    with transaction.atomic():
        for n in range(3):
            sink.emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": str(n)}))

    assert received(layer, channel) == {"type": "run.event", "seq": 3}
    left = layer.channels.get(channel)
    assert left is None or left.empty()


@pytest.mark.django_db(transaction=True)
def test_writers_of_one_commit_each_tell_and_the_last_notice_is_the_newest():
    # Each sink tells of its own newest; the run's notices are throttled
    # (runs/store/events.py _Throttle), so a page hears at most the first at
    # once and the newest at the interval's end, and the first one's read
    # already finds every event of the commit (pages read after their cursor).
    run, layer, channel = watched_run()

    with transaction.atomic():
        for n in range(3):
            UnitPerEventSink(run.pk).emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": str(n)}))

    seqs = [received(layer, channel)["seq"]]
    while seqs[-1] != 3:
        seqs.append(received(layer, channel)["seq"])
    # [1, 3] as a rule ([3] right after another notice of this run; [1, 2, 3]
    # only if the machine paused between the commit's callbacks): in order,
    # the newest last.
    assert seqs == sorted(set(seqs)) and seqs[-1] == 3, seqs


@pytest.mark.django_db(transaction=True)
def test_it_rolls_back_the_event_with_the_change():
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"})

    with pytest.raises(RuntimeError), transaction.atomic():
        UnitPerEventSink(run.pk).emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": "hi"}))
        raise RuntimeError("the change failed")

    run.refresh_from_db()
    assert (run.last_event_seq, run.events.count()) == (0, 0)
    UnitPerEventSink(run.pk).emit(RuntimeEvent("coordinator_narration", "coordinator", {"text": "again"}))
    assert list(run.events.values_list("seq", flat=True)) == [1]


@pytest.mark.django_db
def test_it_starts_ready_steps_and_registers_every_mailbox(django_capture_on_commit_callbacks):
    run = start(django_capture_on_commit_callbacks)

    assert run.status == Run.Status.RUNNING
    statuses = dict(run.steps.values_list("step_id", "status"))
    assert statuses == {"coordinator": "running", "first": "running", "second": "pending"}
    assert event_types(run) == ["workflow_start", "step_start"]
    # second is registered before it starts: a forward to it is kept for its first turn.
    assert actions.router_for(run.pk).forward("second", "early news").text == "queued: msg-fwd-1"


@pytest.mark.django_db
def test_it_does_nothing_when_a_turn_task_is_delivered_twice(django_capture_on_commit_callbacks):
    run = start(django_capture_on_commit_callbacks)
    first = run.steps.get(step_id="first")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        actions.do_step_turn(first.pk, 1)
    with django_capture_on_commit_callbacks(execute=False) as again:
        actions.do_step_turn(first.pk, 1)

    first.refresh_from_db()
    assert first.turns == 1
    assert event_types(run, step_id="first").count("agent_turn") == 1
    assert callbacks  # the first delivery enqueued the next turn
    assert again == []


@pytest.mark.django_db
def test_it_starts_no_second_coordinator_wake_while_one_runs(django_capture_on_commit_callbacks):
    run = start(django_capture_on_commit_callbacks)
    actions.router_for(run.pk).send("first", "hello")
    Run.objects.filter(pk=run.pk).update(coordinator_busy=True)

    actions.do_coordinator_wake(run.pk)

    assert "agent_wake" not in event_types(run)
    assert run.messages.get(message_id="msg-send-1").drained is None


@pytest.mark.django_db
def test_it_cancels_a_run_and_drops_unread_messages_as_workflow_cancelled(django_capture_on_commit_callbacks):
    run = start(django_capture_on_commit_callbacks)
    router = actions.router_for(run.pk)
    router.forward("second", "never read")

    assert actions.do_cancel_run(run.pk, "cancelled by owner")

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert set(run.steps.filter(kind=Step.Kind.STEP).values_list("status", flat=True)) == {"cancelled"}
    drop = run.events.get(type="message_dropped")
    assert (drop.data["reason"], drop.data["to"]) == ("workflow-cancelled", "second")
    assert event_types(run)[-1] == "workflow_end"
    assert router.send("first", "too late").text == "dropped: workflow-cancelled"


@pytest.mark.django_db
def test_it_rejects_inputs_the_workflow_does_not_declare():
    workflow = register("relay")

    with pytest.raises(actions.InputError) as error:
        actions.do_create_run(workflow, {"subjekt": "x"})

    assert str(error.value) == (
        "unknown input 'subjekt' (this workflow takes: subject); missing required input 'subject'"
    )
    assert not Run.objects.exists()
