"""The plain SQL under the mailbox store and the event sink (runs/store/sql/,
runs/store/), which differs by database: closing a mailbox drops what it
held, oldest first, as workflow-cancelled once the run is cancelled; a
turn's held events are written together, in order, numbered without gaps;
a rolled-back savepoint takes its held events with it; a value too long for
its column is refused, never cut; a conditional UPDATE that takes the run's
lock waits for whoever holds it.

Each test runs in both passes of `make test`: on SQLite, and (marked
services) on PostgreSQL, where most of these are single statements."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import DataError, connection, transaction
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agents.core import machine
from agents.events import Event as RuntimeEvent
from agents.router import DropReason
from runs import leases, sweeper
from runs.actions import router_for
from runs.models import Run, Step
from runs.store import last_turn
from runs.store.mailboxes import DjangoMailboxStore
from runs.store.sql import rows, store
from runs.store.unit_of_work import UnitOfWork, UnitPerEventSink

# A valid payload of each type written here: events are checked against the registry.
DATA = {
    "step_start": {"agent": "a"},
    "agent_turn": {
        "turn": 1,
        "agent": "a",
        "content": "",
        "tool_calls": [],
        "prompt_tokens": None,
        "completion_tokens": None,
    },
    "tool_call": {"phase": "start", "tool_call_id": "c1", "name": "t"},
    "step_end": {"status": "completed", "output": ""},
    "agent_wake": {"reason": "messages", "cycle": 1, "messages": 0},
}


def _event(type_: str, step_id: str) -> RuntimeEvent:
    return RuntimeEvent(type_, step_id, DATA[type_])


pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(two_step_run: Run) -> Run:
    return two_step_run


def _types_and_seqs(run: Run) -> list[tuple[int, str]]:
    return list(run.events.order_by("seq").values_list("seq", "type"))


def test_it_closes_a_mailbox_and_drops_what_it_held_oldest_first(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        ids = [router_for(run.pk).forward("s1", f"note {n}").message_id for n in range(3)]
        router_for(run.pk).forward("s2", "for s2")

    with transaction.atomic():
        store().lock_run(run.pk)
        assert router_for(run.pk).close("s1") == 3
        assert router_for(run.pk).close("s1") == 0  # already closed: nothing more to drop

    dropped = run.events.filter(type="message_dropped").order_by("seq")
    assert [event.data["message_id"] for event in dropped] == ids
    assert {event.data["reason"] for event in dropped} == {str(DropReason.TARGET_TERMINAL)}
    assert run.messages.get(recipient="s2").drop_reason == ""  # another mailbox keeps its mail
    with transaction.atomic():
        store().lock_run(run.pk)
        late = router_for(run.pk).forward("s1", "too late")
    assert (late.status, late.reason) == ("dropped", DropReason.TARGET_TERMINAL)


def test_it_closes_a_mailbox_of_a_cancelled_run_as_workflow_cancelled(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        ids = [router_for(run.pk).forward("s1", f"note {n}").message_id for n in range(2)]
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)

    with transaction.atomic():
        assert router_for(run.pk).close("s1", DropReason.TARGET_TERMINAL) == 2
        assert router_for(run.pk).close("s2", DropReason.TARGET_TERMINAL) == 0

    cancelled = str(DropReason.WORKFLOW_CANCELLED)
    dropped = run.events.filter(type="message_dropped").order_by("seq")
    assert [(event.data["message_id"], event.data["reason"]) for event in dropped] == [(i, cancelled) for i in ids]
    assert dict(run.steps.filter(step_id__in=["s1", "s2"]).values_list("step_id", "mailbox_closed_reason")) == {
        "s1": cancelled,
        "s2": cancelled,
    }


def test_it_drops_the_unread_messages_of_an_open_mailbox(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        first = router_for(run.pk).forward("s1", "one").message_id
        second = router_for(run.pk).forward("s1", "two").message_id

    with transaction.atomic():
        assert router_for(run.pk).drop_unread("s1", DropReason.RESUME_SHUTDOWN) == 2

    reasons = dict(run.messages.values_list("message_id", "drop_reason"))
    assert reasons == {first: str(DropReason.RESUME_SHUTDOWN), second: str(DropReason.RESUME_SHUTDOWN)}
    with transaction.atomic():
        store().lock_run(run.pk)
        assert router_for(run.pk).forward("s1", "still open").status == "queued"


def test_marking_mail_read_names_what_was_read_or_dropped_already_and_marks_the_rest(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        read, unread, dropped = (router_for(run.pk).forward("s1", text).message_id for text in ("a", "b", "c"))
        elsewhere = router_for(run.pk).forward("s2", "for s2").message_id
    mailboxes = DjangoMailboxStore(run.pk)
    with transaction.atomic():
        assert mailboxes.mark_read("s1", [read]) == []
    run.messages.filter(message_id=dropped).update(drop_reason=str(DropReason.TARGET_TERMINAL))

    with transaction.atomic():
        # Another mailbox's message and an unknown id are neither.
        already = mailboxes.mark_read("s1", [dropped, unread, read, elsewhere, "msg-999"])
    assert already == sorted([read, dropped])
    drained = dict(run.messages.values_list("message_id", "drained"))
    assert drained[unread] is not None
    assert drained[dropped] is None and drained[elsewhere] is None  # a drop is not a read
    with transaction.atomic():
        assert mailboxes.mark_read("s1", [unread]) == [unread]


def test_it_writes_a_blocks_held_events_together_in_the_order_they_were_emitted(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        UnitPerEventSink(run.pk).emit(_event("step_start", "s1"))
        with UnitOfWork(run.pk) as uow:
            uow.sink.emit(_event("agent_turn", "s1"))
            uow.sink.emit(_event("tool_call", "s1"))
            assert run.events.count() == 1  # the held ones are not written yet
            uow.sink.emit(_event("step_end", "s1"))
        UnitPerEventSink(run.pk).emit(_event("agent_wake", "s2"))

    assert _types_and_seqs(run) == [
        (1, "step_start"),
        (2, "agent_turn"),
        (3, "tool_call"),
        (4, "step_end"),
        (5, "agent_wake"),
    ]
    assert [event.data for event in run.events.order_by("seq")] == [DATA[type_] for _, type_ in _types_and_seqs(run)]
    run.refresh_from_db()
    assert run.last_event_seq == 5


def test_it_discards_the_held_events_of_a_savepoint_that_rolled_back(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        with UnitOfWork(run.pk) as uow:
            uow.sink.emit(_event("agent_turn", "s1"))
            with pytest.raises(RuntimeError), uow.savepoint():
                uow.sink.emit(RuntimeEvent("coordinator_narration", "s1", {"text": "half-done"}))
                raise RuntimeError("the tool broke")
            uow.sink.emit(_event("step_end", "s1"))

    assert _types_and_seqs(run) == [(1, "agent_turn"), (2, "step_end")]


def test_it_discards_held_events_when_the_block_raises(run):
    with pytest.raises(RuntimeError), transaction.atomic():
        store().lock_run(run.pk)
        with UnitOfWork(run.pk) as uow:
            uow.sink.emit(_event("agent_turn", "s1"))
            raise RuntimeError("the turn broke")

    UnitPerEventSink(run.pk).emit(_event("step_end", "s1"))
    assert _types_and_seqs(run) == [(1, "step_end")]


@pytest.mark.services
def test_it_refuses_an_event_type_too_long_for_its_column_on_postgresql(pg_run):
    run = pg_run
    # The events' INSERT casts strings to text, not varchar(n): an explicit
    # cast to varchar(n) would cut the value where the column's own refuses it.
    too_long = "t" * (run.events.model._meta.get_field("type").max_length + 1)

    with pytest.raises(DataError, match="too long"), transaction.atomic():
        # Not an Event: the registry refuses an unknown type before the column could.
        UnitPerEventSink(run.pk).emit(SimpleNamespace(type=too_long, step_id="s1", data={}))

    assert run.events.count() == 0


def _behind_the_runs_lock(run: Run, waiter, *, holder_writes=lambda: None) -> list:
    """Run ``waiter`` in a thread while another holds ``run``'s lock: it
    must still wait half a second on; then the holder runs
    ``holder_writes`` and commits. What ``waiter`` returned, once it did."""
    locked, release, returned = threading.Event(), threading.Event(), []

    def holder() -> None:
        with transaction.atomic():
            store().lock_run(run.pk)
            locked.set()
            release.wait(10)
            holder_writes()
        connection.close()

    def waiting() -> None:
        with transaction.atomic():
            returned.append(waiter())
        connection.close()

    first = threading.Thread(target=holder)
    first.start()
    assert locked.wait(10)
    second = threading.Thread(target=waiting)
    second.start()
    second.join(0.5)
    assert returned == []  # still waiting for the run's lock
    release.set()
    first.join(10)
    second.join(10)
    return returned


@pytest.mark.services
def test_a_conditional_update_that_locks_the_run_waits_for_the_lock_on_postgresql(pg_run):
    run = pg_run
    step = run.steps.get(step_id="s1")

    def update() -> int:
        return store().update(Step, {"turns": 1}, "id = %s AND turns = %s", [step.pk, 0], locking_run=run.pk)

    assert _behind_the_runs_lock(run, update) == [1]
    step.refresh_from_db()
    assert step.turns == 1


@pytest.mark.services
def test_the_pass_under_the_lock_reads_what_the_locks_last_holder_committed_on_postgresql(pg_run):
    # The lock, the flags and the step rows go in one round trip: the reads
    # must still start only once the lock is granted, or they would decide
    # on steps as they were before the holder's commit.
    run = pg_run
    run.steps.filter(step_id="s2").update(status=Step.Status.PENDING)

    def complete_s1_start_s2() -> None:
        run.steps.filter(step_id="s1").update(status=Step.Status.COMPLETED)
        run.steps.filter(step_id="s2").update(status=Step.Status.RUNNING)

    [(state, steps)] = _behind_the_runs_lock(
        run, lambda: store().locked_schedule_state(run.pk), holder_writes=complete_s1_start_s2
    )
    assert state.status == Run.Status.RUNNING and not state.all_done
    assert [(row.step_id, row.status) for row in steps] == [("s1", "completed"), ("s2", "running")]


def test_the_pass_under_the_lock_reads_the_same_on_either_database(run):
    run.steps.filter(step_id="s1").update(status=Step.Status.COMPLETED)
    with transaction.atomic():
        state, steps = store().locked_schedule_state(run.pk)

    assert state == store().schedule_state(run.pk)
    assert steps == store().step_rows(run.pk)
    assert [(row.step_id, row.status) for row in steps] == [("s1", "completed"), ("s2", "running")]
    with transaction.atomic():
        assert store().locked_schedule_state(run.pk + 1000) is None


@pytest.mark.services
def test_scheduling_reads_only_the_unfinished_steps_on_postgresql(pg_run):
    # Asked after every step's end: a 500-step run must not read its 500
    # rows each time. The statuses written into the query must match the
    # partial indexes' conditions (runs/models/runs.py) for the planner to use them.
    from runs.store.sql.schedule import schedule_state_sql

    with store().cursor() as cursor:
        explained = f"EXPLAIN {schedule_state_sql(store().depends_on)}"
        cursor.execute(explained, {"coordinator": "coordinator", "run": pg_run.pk})
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "step_pending" in plan
    assert "step_unfinished" in plan


@pytest.mark.services
def test_a_claim_and_its_renewal_add_no_index_entries_on_postgresql(pg_run):
    # Heap-only updates: no indexed column changes (runs/models/runs.py, Step's
    # lease) and the new version fits on its page (migration 0011's
    # fillfactor). Every turn claims its step; with the lease indexed, each
    # claim and renewal added an entry to every one of the step's indexes.
    step = pg_run.steps.get(step_id="s1")
    with transaction.atomic():
        assert leases.claim_turn(step.pk, 1, "worker-a") is not None
        leases._RENEWALS._renew([(Step, step.pk, "worker-a")])
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_stat_get_xact_tuples_updated(%(t)s::regclass),"
                " pg_stat_get_xact_tuples_hot_updated(%(t)s::regclass)",
                {"t": Step._meta.db_table},
            )
            updated, heap_only = cursor.fetchone()

    assert (updated, heap_only) == (2, 2)


@pytest.mark.services
def test_a_lease_that_ran_out_is_taken_over_only_once_the_server_has_been_up_a_lease_period_on_postgresql(
    pg_run, settings
):
    # After PostgreSQL comes back no worker could have renewed its lease:
    # the one that held this turn gets a lease period to renew it before a
    # redelivered task takes the turn (as the sweeper waits: leases_lapse).
    # The machine's server has been up for a while: a lease period longer
    # than that stands for a server that just came back.
    step = pg_run.steps.get(step_id="s1")
    Step.objects.filter(pk=step.pk).update(lease_owner="worker-a", lease_expires=timezone.now() - timedelta(seconds=5))
    settings.ZENWEB_LEASE_SECONDS = store().database_up_for() + 3600

    assert leases.claim_turn(step.pk, 1, "worker-b") is None
    assert not leases.claim(step.pk, 1, "worker-b")
    assert leases.claim_turn(step.pk, 1, "worker-a") is not None  # its own, renewed
    Step.objects.filter(pk=step.pk).update(lease_expires=timezone.now() - timedelta(seconds=5))

    settings.ZENWEB_LEASE_SECONDS = 30  # the server has been up longer than a lease period
    assert leases.claim_turn(step.pk, 1, "worker-b").lease_owner == "worker-b"
    Step.objects.filter(pk=step.pk).update(lease_owner="worker-a", lease_expires=timezone.now() - timedelta(seconds=5))
    assert leases.claim(step.pk, 1, "worker-b")


@pytest.mark.services
def test_a_claim_on_its_own_commits_without_waiting_for_the_disk_on_postgresql(pg_run):
    # A lease only (rows.LEASE_ONLY_COMMIT): lost in a crash of PostgreSQL
    # with everything after it, the turn is still marked queued and the
    # sweeper queues it again. Observed inside the claim's own transaction,
    # opened around its statement here.
    step = pg_run.steps.get(step_id="s1")
    Step.objects.filter(pk=step.pk).update(turn_queued=timezone.now())
    commit_modes: list[str] = []

    def in_a_transaction_of_its_own(execute, statement, params, many, context):
        if not statement.startswith(f"UPDATE {rows.table(Step)} s SET lease_owner"):
            return execute(statement, params, many, context)
        raw = context["connection"].connection
        raw.execute("BEGIN")
        try:
            result = execute(statement, params, many, context)
            commit_modes.append(raw.execute("SHOW synchronous_commit").fetchone()[0])
        finally:
            raw.execute("COMMIT")
        return result

    with connection.execute_wrapper(in_a_transaction_of_its_own):
        claimed = leases.claim_turn(step.pk, 1, "worker-a")

    assert claimed is not None and claimed.lease_owner == "worker-a"
    assert commit_modes == ["off"]
    step.refresh_from_db()
    assert (step.lease_owner, step.turn_queued) == ("worker-a", None)  # committed, visible at once


@pytest.mark.services
def test_a_claim_inside_a_callers_transaction_leaves_its_commit_durable_on_postgresql(pg_run):
    step = pg_run.steps.get(step_id="s1")
    with transaction.atomic(), connection.cursor() as cursor:
        assert leases.claim_turn(step.pk, 1, "worker-a") is not None
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


@pytest.mark.services
def test_a_wakes_claim_commits_without_waiting_for_the_disk_and_only_it_on_postgresql(pg_run):
    from runs.store.sql.run_claims import claim_wake_sql

    claim = (claim_wake_sql(), {"run": pg_run.pk, "running": Run.Status.RUNNING, "coordinator": "coordinator"})
    mode = ("SELECT current_setting('synchronous_commit')", {})
    claimed, in_its_transaction = store().in_one_round_trip([claim, mode])
    (after,) = store().in_one_round_trip([mode])

    assert len(claimed) == 1 and in_its_transaction == [("off",)]
    assert after == [("on",)]
    pg_run.refresh_from_db()
    assert pg_run.coordinator_busy


@pytest.mark.services
def test_the_sweeper_finds_expired_leases_by_an_index_on_postgresql(pg_run):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: the plan if it had many
        plan = sweeper.expired_leases(timezone.now()).explain()

    assert "step_running" in plan


@pytest.mark.services
def test_the_per_turn_statements_are_prepared_and_the_orms_are_not_on_postgresql(pg_run):
    # Django turns psycopg's preparing off unless OPTIONS names a threshold,
    # and psycopg then ignores prepare=True: these statements were parsed
    # and planned anew on every turn (zenweb/settings.py sets it).
    with transaction.atomic():
        store().lock_run(pg_run.pk)
        for _ in range(6):  # past psycopg's threshold: the ORM must still not prepare
            list(Run.objects.filter(pk=pg_run.pk))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]

    assert any("FOR UPDATE" in statement and "runs_run" in statement for statement in prepared), prepared
    assert not any('"runs_run"."workflow_id"' in statement for statement in prepared), prepared


def _last_turn(step: Step) -> tuple[int, tuple | None]:
    completed = {"status": Step.Status.COMPLETED, "output": "all done", "finished": timezone.now()}
    with transaction.atomic():
        store().lock_run(step.run_id)
        return last_turn.save(step, [{"role": "assistant", "content": "all done"}], (7, 3), completed)


def test_a_pending_step_may_start_once_nothing_it_waits_for_is_unfinished(run):
    # On both databases (the general path's flags, and those read after
    # commit): a step waiting for two may start only once the second ends.
    s1, s2 = run.steps.get(step_id="s1"), run.steps.get(step_id="s2")
    Step.objects.create(run=run, step_id="s3", agent="worker", position=2, depends_on=["s1", "s2"])
    Step.objects.create(run=run, step_id="s4", agent="worker", position=3, depends_on=["s3"])

    assert store().schedule_state(run.pk).may_start is False
    assert _last_turn(s1)[1].may_start is False  # s3 still waits for s2
    assert _last_turn(s2)[1].may_start is True  # the statement sees s2 as ending
    assert store().schedule_state(run.pk).may_start is True  # and after commit
    Step.objects.filter(run=run, step_id="s4").update(depends_on=[])
    Step.objects.filter(run=run, step_id="s3").update(status=Step.Status.RUNNING)
    assert store().schedule_state(run.pk).may_start is True  # s4 waits for nothing now


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(st.sampled_from(Step.Status.values), st.sets(st.integers(min_value=0, max_value=5))),
        min_size=1,
        max_size=6,
    )
)
# A step waiting for a pending one waits too, however the rest are.
@example([("running", set()), ("pending", {0}), ("pending", {1})])
def test_no_step_the_state_machine_would_start_is_missed_by_may_start(run, steps):
    # may_start spares reading a run's steps after a completion (no pending
    # step may start): wherever a full pass of the state machine starts a
    # step, it must be true. Random runs of up to six steps, each depending
    # on some of the ones before it, in any status.
    fresh = Run.objects.create(workflow=run.workflow, status=Run.Status.RUNNING)
    for n, (status, needs) in enumerate(steps):
        depends_on = [f"s{m}" for m in sorted(needs) if m < n]
        Step.objects.create(
            run=fresh, step_id=f"s{n}", agent="worker", position=n, status=status, depends_on=depends_on
        )
    state = machine.RunState(
        "running",
        tuple(
            machine.StepState(f"s{n}", status, tuple(f"s{m}" for m in sorted(needs) if m < n), position=n)
            for n, (status, needs) in enumerate(steps)
        ),
        max_running=100,
    )

    may_start = store().schedule_state(fresh.pk).may_start

    if machine.full_pass(state):
        assert may_start
    # And it is exactly: a pending step none of whose dependencies is unfinished.
    unfinished = {f"s{n}" for n, (status, _) in enumerate(steps) if status not in Step.TERMINAL}
    assert may_start == any(
        status == Step.Status.PENDING and not {f"s{m}" for m in needs if m < n} & unfinished
        for n, (status, needs) in enumerate(steps)
    )


def test_a_last_turn_with_an_empty_mailbox_completes_the_step_and_reads_the_runs_state(run):
    s1, s2 = run.steps.get(step_id="s1"), run.steps.get(step_id="s2")

    unread, state = _last_turn(s1)

    assert unread == 0
    status, busy, has_mail, may_start, all_done, workflow_id, _ = state
    assert (status, busy, has_mail, may_start) == (Run.Status.RUNNING, False, False, False)
    assert workflow_id == run.workflow_id
    assert all_done is False  # s2 is still running
    s1.refresh_from_db()
    assert (s1.status, s1.output, s1.mailbox_closed_reason) == (Step.Status.COMPLETED, "all done", "target-terminal")
    assert (s1.prompt_tokens, s1.completion_tokens, s1.transcript[-1]["content"]) == (7, 3, "all done")
    assert s1.finished is not None

    assert _last_turn(s2)[1][4] is True  # the last step to end sees every step done


def test_a_last_turn_with_mail_waiting_stores_the_turn_but_leaves_the_step_running(run):
    with transaction.atomic():
        store().lock_run(run.pk)
        router_for(run.pk).forward("s1", "one more thing")
    s1 = run.steps.get(step_id="s1")

    assert _last_turn(s1) == (1, None)

    s1.refresh_from_db()
    assert (s1.status, s1.output, s1.mailbox_closed_reason, s1.finished) == (Step.Status.RUNNING, "", "", None)
    assert (s1.prompt_tokens, s1.transcript[-1]["content"]) == (7, "all done")


def test_a_last_turn_keeps_the_reason_a_mailbox_was_closed_with(run):
    Step.objects.filter(run=run, step_id="s1").update(mailbox_closed_reason="mailbox-closed-by-finalize")

    _last_turn(run.steps.get(step_id="s1"))

    assert run.steps.get(step_id="s1").mailbox_closed_reason == "mailbox-closed-by-finalize"


def test_insert_many_stores_rows_as_bulk_create_does_and_sets_their_ids(run):
    def step(step_id: str) -> Step:
        return Step(
            run=run,
            step_id=step_id,
            agent="worker",
            position=7,
            depends_on=["s1"],
            limits=[["items", 3]],
            variables={"item": "nul\0here"},
            instructions="Handle $item.",
            started=timezone.now(),
        )

    ours, theirs = [step("a[0].work"), step("a[1].work")], [step("b[0].work"), step("b[1].work")]
    store().insert_many(ours)
    Step.objects.bulk_create(theirs)

    assert [s.step_id for s in Step.objects.filter(pk__in=[s.pk for s in ours]).order_by("pk")] == [
        "a[0].work",
        "a[1].work",
    ]
    assert not ours[0]._state.adding

    def stored(steps: list[Step]) -> list[dict]:
        rows = Step.objects.filter(pk__in=[s.pk for s in steps]).order_by("pk").values()
        return [{k: v for k, v in row.items() if k not in ("id", "step_id", "started")} for row in rows]

    assert stored(ours) == stored(theirs)
    if connection.vendor == "postgresql":  # which cannot store NUL: replaced, as every writer does
        assert stored(ours)[0]["variables"] == {"item": "nul\ufffdhere"}
