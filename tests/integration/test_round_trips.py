"""What a transaction costs in round trips to PostgreSQL, read off the wire
(libpq's trace of this test's connection): a transaction's BEGIN goes with
its first statement (zenweb/postgresql/base.py), once however many
pipelines follow, and a step's turn that sends a message reads the run's
message counter in the round trip that records the turn and takes the run's
lock (runs/actions/steps.py _record_turn). Also that a transaction begun
that way still rolls back, its first statement too."""

from __future__ import annotations

import contextlib
import tempfile

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg import pq

from agents.router import COORDINATOR
from runs import sql
from runs.actions import do_register_workflow
from runs.actions.steps import do_step_turn
from runs.models import Event, Run, Step

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

SENDER = """\
name: round-trips
agents:
  sender:
    provider: scripted
    script:
      - calls: [{tool: send_message, args: {text: "found it"}}]
      - say: done
steps:
  - {id: s1, agent: sender}
"""


@contextlib.contextmanager
def wire():
    """Yield a list that, once the block ends, holds the block's round trips
    on this test's connection: for each, the messages the client sent before
    it next read the server's answers (``Parse "" "BEGIN"``, ``Sync``, ...).
    Statements are not prepared here, so each Parse shows its text."""
    connection.ensure_connection()
    psycopg_connection = connection.connection
    threshold, psycopg_connection.prepare_threshold = psycopg_connection.prepare_threshold, None
    trips: list[list[str]] = []
    with tempfile.TemporaryFile() as trace:
        psycopg_connection.pgconn.trace(trace.fileno())
        psycopg_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield trips
        finally:
            psycopg_connection.pgconn.untrace()
            psycopg_connection.prepare_threshold = threshold
            trace.seek(0)
            trips.extend(_round_trips(trace.read().decode()))


def _round_trips(trace: str) -> list[list[str]]:
    trips: list[list[str]] = []
    sent: list[str] = []
    for line in trace.splitlines():
        direction, _, message = (line.split("\t", 2) + ["", ""])[:3]
        if direction == "F":
            sent.append(message)
        elif direction == "B" and sent:
            trips.append(sent)
            sent = []
    return trips


def _with(trip: list[str], text: str) -> bool:
    return any(text in message for message in trip)


def test_a_transactions_begin_goes_with_its_first_statement(pg_run):
    with wire() as trips, transaction.atomic():
        sql.lock_run(pg_run.pk)

    assert len(trips) == 2, trips
    assert _with(trips[0], '"BEGIN"') and _with(trips[0], "FOR UPDATE")
    assert trips[0].index('Parse\t "" "BEGIN" 0') < next(n for n, m in enumerate(trips[0]) if "FOR UPDATE" in m)
    assert _with(trips[1], "COMMIT")


def test_a_transaction_begins_once_whatever_its_first_statements_are(pg_run):
    with wire() as trips, transaction.atomic():
        sql.pipelined([(sql.lock_run_sql(), [pg_run.pk]), ("SELECT 1", [])])
        sql.pipelined([("SELECT 2", []), ("SELECT 3", [])])
        sql.lock_run(pg_run.pk)

    sent = [message for trip in trips for message in trip]
    assert sum('"BEGIN"' in message for message in sent) == 1
    assert len(trips) == 4, trips  # BEGIN with the first pipeline, the second, the lock, COMMIT


def test_a_transaction_begun_with_its_first_statement_rolls_that_statement_back(pg_run):
    with pytest.raises(RuntimeError), transaction.atomic():
        sql.update(Run, {"status": Run.Status.FAILED}, "id = %s", [pg_run.pk])
        raise RuntimeError("the turn went wrong after its first statement")

    pg_run.refresh_from_db()
    assert pg_run.status == Run.Status.RUNNING


def test_transactions_inside_one_pipeline_each_begin_and_end(pg_run):
    # BEGIN queued with no sync: a COMMIT or ROLLBACK in the same pipeline
    # must still find the transaction open, and the next one begin again.
    with connection.connection.pipeline():
        with transaction.atomic():
            # Its rows read back before the commit: the pipeline has no
            # result outstanding when COMMIT is asked for.
            assert sql.update_returning(Run, pg_run.pk, {"status": Run.Status.FAILED}, {}, ["status"]) == ("failed",)
        with pytest.raises(RuntimeError), transaction.atomic():
            sql.update(Run, {"status": Run.Status.COMPLETED}, "id = %s", [pg_run.pk])
            raise RuntimeError("rolled back")

    pg_run.refresh_from_db()
    assert pg_run.status == Run.Status.FAILED


def test_a_first_statement_that_fails_leaves_the_connection_ready_for_the_next_transaction(pg_run):
    Event.objects.create(run=pg_run, seq=1, type="workflow_start", data={})
    now = timezone.now()

    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert(Event, run=pg_run.pk, seq=1, type="duplicate", step_id="", data={}, created=now)
    with transaction.atomic():
        sql.insert(Event, run=pg_run.pk, seq=2, type="workflow_end", step_id="", data={}, created=now)

    assert list(pg_run.events.order_by("seq").values_list("seq", "type")) == [
        (1, "workflow_start"),
        (2, "workflow_end"),
    ]


def test_a_step_turn_that_sends_reads_the_message_counter_with_its_lock(transactional_db):
    workflow, _ = do_register_workflow(SENDER, "tests/integration/test_round_trips.py")
    run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, started=timezone.now())
    Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
    step = Step.objects.create(run=run, step_id="s1", agent="sender", status=Step.Status.RUNNING)

    with wire() as trips:
        do_step_turn(step.pk, 1)

    recorded = [trip for trip in trips if _with(trip, 'UPDATE "runs_step" SET "turns"')]
    assert len(recorded) == 1, trips
    # BEGIN, the turn's record (which takes the run's lock), the counter.
    assert _with(recorded[0], '"BEGIN"') and _with(recorded[0], "FOR UPDATE")
    assert _with(recorded[0], "SELECT r.last_message_no")
    assert not [trip for trip in trips if trip is not recorded[0] and _with(trip, "last_message_no, r.status")]
    message = run.messages.get()
    assert (message.message_id, message.sender, message.recipient, message.content) == (
        "msg-send-1",
        "s1",
        COORDINATOR,
        "found it",
    )
    step.refresh_from_db()
    assert (step.turns, step.status) == (1, Step.Status.RUNNING)
