"""A step's usual last turn in one round trip on PostgreSQL (runs/store/last_turn.py):
it records the turn, completes the step, closes its mailbox and numbers its
events after the run's last, all or nothing; it writes nothing when mail
arrived during the turn or the turn is no longer the caller's, so that the
general path can take it. And the pipeline under it (the store's in_one_round_trip)
commits its statements together or not at all."""

from __future__ import annotations

import pytest
from django.db import DataError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.events import Event as RuntimeEvent
from agents.router import DropReason
from runs.actions import router_for
from runs.actions.catalog import workflow_spec
from runs.actions.steps import do_step_turn
from runs.models import Run, Step
from runs.store import last_turn
from runs.store.sql import rows, store

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _turn_data(turn: int, content: str) -> dict:
    return {
        "turn": turn,
        "agent": "a",
        "content": content,
        "tool_calls": [],
        "prompt_tokens": None,
        "completion_tokens": None,
    }


def _write(step: Step, turn: int = 1, *, with_steps: bool = False):
    completed = {"status": Step.Status.COMPLETED, "output": "all done", "finished": timezone.now()}
    now = timezone.now()
    events = [
        (RuntimeEvent("agent_turn", step.step_id, _turn_data(turn, "all done")), now),
        (RuntimeEvent("step_end", step.step_id, {"status": "completed", "output": "all done"}), now),
    ]
    transcript = [{"role": "assistant", "content": "all done"}]
    return last_turn.write(step, turn, transcript, (7, 3), completed, events, with_steps=with_steps)


def test_it_completes_the_step_and_numbers_its_events_after_the_runs_last(pg_run):
    Run.objects.filter(pk=pg_run.pk).update(last_event_seq=41)
    s1 = pg_run.steps.get(step_id="s1")
    Step.objects.filter(pk=s1.pk).update(lease_owner="me", lease_expires=timezone.now())

    last_seq, state, steps, started = _write(s1)

    assert last_seq == 43
    assert list(pg_run.events.order_by("seq").values_list("seq", "type", "step_id")) == [
        (42, "agent_turn", "s1"),
        (43, "step_end", "s1"),
    ]
    s1.refresh_from_db()
    assert (s1.status, s1.output, s1.turns, s1.finished is not None) == (Step.Status.COMPLETED, "all done", 1, True)
    assert (s1.prompt_tokens, s1.completion_tokens, s1.transcript[-1]["content"]) == (7, 3, "all done")
    assert (s1.lease_owner, s1.lease_expires, s1.mailbox_closed_reason) == ("", None, "target-terminal")
    status, busy, has_mail, may_start, all_done, workflow_id, _ = state
    assert (status, busy, has_mail, may_start, all_done) == (Run.Status.RUNNING, False, False, False, False)
    assert workflow_id == pg_run.workflow_id
    assert steps is None and started is None  # neither asked for

    assert _write(pg_run.steps.get(step_id="s2")).schedule.all_done is True  # the last step to end sees every step done


def test_it_reads_the_runs_steps_with_the_write_when_asked_and_a_step_waits(pg_run):
    s1 = pg_run.steps.get(step_id="s1")
    Step.objects.filter(run=pg_run, step_id="s2").update(status=Step.Status.PENDING, depends_on=["s1"])
    Step.objects.create(run=pg_run, step_id="s3", agent="worker", position=2, depends_on=["s1", "s2"])

    steps = _write(s1, with_steps=True).steps

    # In the workflow's order, the coordinator left out, the step just written completed.
    assert [(row.step_id, row.status, row.depends_on) for row in steps] == [
        ("s1", Step.Status.COMPLETED, ()),
        ("s2", Step.Status.PENDING, ("s1",)),
        ("s3", Step.Status.PENDING, ("s1", "s2")),
    ]
    assert steps[0].pk == s1.pk and steps[0].resuming is False
    # Nothing pending: nothing read.
    Step.objects.filter(run=pg_run).exclude(step_id="s1").update(status=Step.Status.RUNNING)
    assert _write(pg_run.steps.get(step_id="s2"), with_steps=True).steps is None


def test_it_reads_no_steps_while_every_waiting_step_still_waits_for_another(pg_run):
    # A fan-in: s3 waits for s1 and s2. s1's end leaves s3 waiting for s2,
    # so nothing can start and the run's steps are not read (a report after
    # a 500-iteration loop was read 500 rows at each iteration's end); s2's
    # end is the one that can start s3, and reads them.
    Step.objects.create(run=pg_run, step_id="s3", agent="worker", position=2, depends_on=["s1", "s2"])

    first = _write(pg_run.steps.get(step_id="s1"), with_steps=True)
    last = _write(pg_run.steps.get(step_id="s2"), with_steps=True)

    assert (first.schedule.may_start, first.steps) == (False, None)
    assert last.schedule.may_start is True
    assert [(row.step_id, row.status) for row in last.steps] == [
        ("s1", Step.Status.COMPLETED),
        ("s2", Step.Status.COMPLETED),
        ("s3", Step.Status.PENDING),
    ]


def test_it_writes_nothing_when_mail_reached_the_step_during_its_turn(pg_run):
    with transaction.atomic():
        store().lock_run(pg_run.pk)
        router_for(pg_run.pk).forward("s1", "one more thing")
    seq_before = Run.objects.get(pk=pg_run.pk).last_event_seq

    assert _write(pg_run.steps.get(step_id="s1")) is None

    s1 = pg_run.steps.get(step_id="s1")
    assert (s1.status, s1.turns, s1.transcript, s1.mailbox_closed_reason) == (Step.Status.RUNNING, 0, [], "")
    assert Run.objects.get(pk=pg_run.pk).last_event_seq == seq_before
    assert not pg_run.events.filter(type__in=["agent_turn", "step_end"]).exists()


def test_it_writes_nothing_when_another_worker_recorded_the_turn(pg_run):
    Step.objects.filter(run=pg_run, step_id="s1").update(turns=1, transcript=[{"role": "assistant", "content": "mine"}])

    assert _write(pg_run.steps.get(step_id="s1"), turn=1) is None

    s1 = pg_run.steps.get(step_id="s1")
    assert (s1.status, s1.transcript[-1]["content"]) == (Step.Status.RUNNING, "mine")
    assert not pg_run.events.exists()


def test_it_keeps_the_reason_a_mailbox_was_closed_with(pg_run):
    Step.objects.filter(run=pg_run, step_id="s1").update(mailbox_closed_reason=DropReason.MAILBOX_CLOSED_BY_FINALIZE)

    _write(pg_run.steps.get(step_id="s1"))

    assert pg_run.steps.get(step_id="s1").mailbox_closed_reason == DropReason.MAILBOX_CLOSED_BY_FINALIZE


def test_a_step_turn_records_its_last_turn_in_one_round_trip(pg_run):
    Step.objects.filter(run=pg_run, step_id="s1").update(instructions="Handle it.")
    s1 = pg_run.steps.get(step_id="s1")
    workflow_spec(pg_run.workflow)  # parsed and cached, as after a run's first turn

    with CaptureQueriesContext(connection) as queries:
        do_step_turn(s1.pk, 1)

    s1.refresh_from_db()
    assert s1.status == Step.Status.COMPLETED
    assert [event.type for event in pg_run.events.order_by("seq")] == ["agent_turn", "step_end"]
    # The claim, then the run's lock and the write, sent together.
    assert len(queries) == 3, [str(query["sql"])[:80] for query in queries]
    assert "FOR UPDATE" in queries[1]["sql"] and "runs_event" in queries[2]["sql"]


def test_a_step_turn_with_mail_arriving_meanwhile_takes_the_general_path(pg_run, monkeypatch):
    Step.objects.filter(run=pg_run, step_id="s1").update(instructions="Handle it.")
    s1 = pg_run.steps.get(step_id="s1")
    write = last_turn.write

    def mail_arrives_first(*args, **kwargs):
        with transaction.atomic():
            store().lock_run(pg_run.pk)
            router_for(pg_run.pk).forward("s1", "one more thing")
        return write(*args, **kwargs)

    monkeypatch.setattr(last_turn, "write", mail_arrives_first)
    queued = []
    monkeypatch.setattr("runs.tasks.run_step_turn.delay", lambda *args: queued.append(args))

    do_step_turn(s1.pk, 1)

    s1.refresh_from_db()
    # Turn 1 recorded once, and a wake cycle to read the message.
    assert (s1.status, s1.turns, s1.wake_cycles) == (Step.Status.RUNNING, 1, 1)
    assert queued == [(s1.pk, 2)]
    types = [event.type for event in pg_run.events.order_by("seq")]
    assert types.count("agent_turn") == 1 and "step_end" not in types
    assert "agent_wake" in types


def test_its_statements_commit_together_or_not_at_all(pg_run):
    bump = (f"UPDATE {rows.table(Run)} SET last_event_seq = 99 WHERE id = %s RETURNING id", [pg_run.pk])

    with pytest.raises(DataError):
        store().in_one_round_trip([bump, ("SELECT 1 / %s", [0])])

    assert Run.objects.get(pk=pg_run.pk).last_event_seq == 0
    read = ("SELECT last_event_seq FROM runs_run WHERE id = %s", [pg_run.pk])
    assert store().in_one_round_trip([bump, read]) == [[(pg_run.pk,)], [(99,)]]
    assert Run.objects.get(pk=pg_run.pk).last_event_seq == 99  # committed, and the connection still works


def test_it_refuses_to_run_inside_a_transaction(pg_run):
    with transaction.atomic(), pytest.raises(RuntimeError, match="no open transaction"):
        store().in_one_round_trip([("SELECT 1", [])])


def test_it_stores_what_a_model_said_with_nul_in_it_as_the_other_writers_do(pg_run):
    s1 = pg_run.steps.get(step_id="s1")
    said = "nul\0here, and a backslash: \\u0000"
    events = [(RuntimeEvent("agent_turn", "s1", _turn_data(1, said)), timezone.now())]
    completed = {"status": Step.Status.COMPLETED, "output": said, "finished": timezone.now()}

    last_turn.write(s1, 1, [{"role": "assistant", "content": said}], (1, 1), completed, events)

    kept = "nul\ufffdhere, and a backslash: \\u0000"
    s1.refresh_from_db()
    assert (s1.output, s1.transcript[-1]["content"]) == (kept, kept)
    assert pg_run.events.get(type="agent_turn").data == _turn_data(1, kept)


def test_both_writers_of_a_last_turn_leave_the_same_step_and_events(pg_run, monkeypatch):
    Step.objects.filter(run=pg_run).exclude(step_id="coordinator").update(instructions="Handle it.")
    s1, s2 = pg_run.steps.get(step_id="s1"), pg_run.steps.get(step_id="s2")

    do_step_turn(s1.pk, 1)  # in one round trip
    monkeypatch.setattr(last_turn, "write", lambda *turn, **options: None)
    do_step_turn(s2.pk, 1)  # the general path

    def seen(step: Step) -> tuple:
        step.refresh_from_db()
        fields = (step.status, step.output, step.turns, step.prompt_tokens, step.completion_tokens, step.transcript)
        fields += (step.mailbox_closed_reason, step.lease_owner, step.lease_expires, step.finished is not None)
        events = [(e.type, e.data) for e in pg_run.events.filter(step_id=step.step_id).order_by("seq")]
        return repr((fields, events)).replace(f"'{step.step_id}'", "<step>")

    assert seen(s1) == seen(s2)
    assert list(pg_run.events.order_by("seq").values_list("seq", flat=True)) == [1, 2, 3, 4]


def test_an_empty_answer_is_no_last_turn_on_either_path(pg_run, monkeypatch):
    """Neither writer completes a step with an empty answer: both leave it
    running with the retry hint as the next thing its model reads."""
    from agents.llm.base import Completion
    from runs.actions import model_calls

    class Silent:
        def complete(self, request, **hooks):
            return Completion(content=" ")

    monkeypatch.setattr(model_calls, "provider_for", lambda agent: Silent())
    queued = []
    monkeypatch.setattr("runs.tasks.run_step_turn.delay", lambda *args: queued.append(args))
    s1, s2 = pg_run.steps.get(step_id="s1"), pg_run.steps.get(step_id="s2")

    do_step_turn(s1.pk, 1)  # where the one-trip writer would apply
    monkeypatch.setattr(last_turn, "write", lambda *turn, **options: None)
    do_step_turn(s2.pk, 1)  # the general path

    for step in (s1, s2):
        step.refresh_from_db()
        assert (step.status, step.turns, step.output) == (Step.Status.RUNNING, 1, "")
        assert step.transcript[-2] == {"role": "assistant", "content": " "}
        assert step.transcript[-1]["content"].startswith("Your answer was empty: no text and no tool call.")
    assert queued == [(s1.pk, 2), (s2.pk, 2)]
    assert not pg_run.events.filter(type="step_end").exists()
