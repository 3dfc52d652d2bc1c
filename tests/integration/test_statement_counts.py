"""How many database statements a step turn, a routed message, a run's
start and its coordinator's finish cost, on SQLite and on PostgreSQL: each
is held at or under what it costs today, so a change that adds one fails
here and names the new statement.

Counted at the DB-API level (``connection.execute_wrapper``), which sees
every statement sent through Django's cursors: the ORM's, runs/store/sql/'s
``plain_cursor`` and the statements it pipelines. Transactions count too:
a BEGIN (SQLite's comes through a cursor; psycopg sends PostgreSQL's
itself, when Django turns autocommit off) and a COMMIT each cost a round
trip. The relay workflow: ``first`` sends a message for ``second`` to the
coordinator, which forwards it; ``first``'s next answer, with no tool
call, completes it and starts ``second``."""

from __future__ import annotations

import contextlib

import pytest
from django.db import connection

from runs import actions, leases
from runs.actions.coordinator import do_coordinator_wake
from runs.actions.steps import do_step_turn
from runs.models import Run, Step
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

# The most statements each may cost, per database: what they cost today.
# A tool-less last turn on PostgreSQL, taken from a queued task: the claim
# that loads the step (1), the turn written in one pipeline with the run's
# step rows read back (runs/store/last_turn.py: 2 statements, one round
# trip), then the state machine's decision on its dependents, from those
# rows, and the successor started without the run's lock (the conditional
# UPDATE and its step_start event, one statement in autocommit:
# runs/store/sql/steps.py start_steps): 4 statements, 3 round trips. A
# chained step taken eagerly makes it one round trip
# (tests/integration/test_eager_successor.py). SQLite takes the same
# path, the store sending the write statement by statement in a
# transaction, and the successor started and claimed by this worker.
TOOL_LESS_TURN = {"sqlite": 17, "postgresql": 4}
# A forEach iteration's tool-less last turn while the step after the loop
# waits for the others, taken from a queued task: the claim, then the turn
# written (on PostgreSQL in one pipeline with the run's step rows read back;
# on SQLite in its transaction, the rows read after commit), from which the
# state machine decides that nothing starts: no pass under the run's lock
# (which would cost 5 more statements on PostgreSQL and 4 on SQLite).
MAP_TURN = {"sqlite": 8, "postgresql": 3}
# A step's tool-less last turn under a cap that binds (maxConcurrency 1,
# two steps pending), taken eagerly: on PostgreSQL the turn written with
# the run's flags and rows in one pipeline that keeps the transaction open
# under the run's lock, the next step decided on and started and claimed
# under it, one COMMIT (runs/actions/steps.py _last_turn_deciding_under_lock),
# where a pass of its own after commit would take BEGIN, the lock and its
# reads, and a COMMIT more. SQLite takes the same path, statement by statement.
CAPPED_TURN = {"sqlite": 13, "postgresql": 5}
# A turn that calls send_message: the message goes to the coordinator. A
# messaging tool's call writes only what the turn holds, so it takes no
# savepoint (runs/store/unit_of_work.py undoable).
SENDING_TURN = {"sqlite": 15, "postgresql": 11}
# The coordinator's wake that forwards it to second: on PostgreSQL the wake
# claimed with its steps and inbox, its agent_wake; a round that takes the
# run's lock with the message counter (one round trip:
# runs/store/sql/messages.py locked_counter), marks the inbox read (one
# statement: runs/store/sql/mailboxes.py mark_read), forwards (held, no
# savepoint), writes the message with its events, the turn and its tool
# call; a second round (the model's answer) and the wake's end.
FORWARD = {"sqlite": 31, "postgresql": 22}
# A run's start on a worker, which takes its first step's turn itself
# (runs/actions/lifecycle.py do_start_run): the run claimed and read back
# in one statement on PostgreSQL, its steps, its workflow_start event, the
# first step started and claimed; BEGIN and COMMIT.
START = {"sqlite": 13, "postgresql": 6}
# The coordinator's finish wake (runs/actions/coordinator.py): the wake
# claimed with the run and its coordinator read back, the steps, the inbox
# (one round trip on PostgreSQL: runs/store/sql/run_claims.py claim_wake);
# its agent_wake with the coordinator's turns (one round trip); its round,
# which ends the run in its transaction (the lock and counter in one round
# trip, finalize in a savepoint taken as it closes the coordinator's
# mailbox, the round's events in one INSERT, the turn,
# its tool call;
# the steps' statuses, then the run's and the coordinator's end with what
# the run leaves open in one statement on PostgreSQL, workflow_end:
# runs/actions/ending.py finish_locked).
FINISH = {"sqlite": 28, "postgresql": 18}


@pytest.fixture
def relay(vendor, recorded_tasks) -> Run:
    """A started relay run, once per database, whose tasks are recorded
    instead of published: each step of it is run here by hand."""
    run = actions.do_create_run(register("relay"), {"subject": "tides"})
    actions.do_start_run(run.pk)
    return run


@contextlib.contextmanager
def statements():
    """Yield a list that gathers the statements this connection runs in the
    block, BEGIN and COMMIT included."""
    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(" ".join(sql.split())[:160])
        return execute(sql, params, many, context)

    commit, set_autocommit = connection.commit, connection.set_autocommit

    def committing():
        sent.append("COMMIT")
        commit()

    def beginning(autocommit, *args, **kwargs):
        # SQLite's BEGIN is a statement its backend runs through a cursor.
        if not autocommit and connection.vendor == "postgresql":
            sent.append("BEGIN")
        set_autocommit(autocommit, *args, **kwargs)

    connection.commit, connection.set_autocommit = committing, beginning
    try:
        with connection.execute_wrapper(record):
            yield sent
    finally:
        del connection.commit, connection.set_autocommit


def _listed(sent: list[str]) -> str:
    return "\n".join(f"{n:3} {statement}" for n, statement in enumerate(sent, 1))


def test_a_step_turn_and_a_routed_message_cost_no_more_statements_than_today(relay):
    vendor = connection.vendor
    first = relay.steps.get(step_id="first")
    with statements() as sending:
        do_step_turn(first.pk, 1)  # send_message: "for second: ..."
    with statements() as forwarding:
        do_coordinator_wake(relay.pk)  # forwards it to second
    with statements() as last:
        do_step_turn(first.pk, 2)  # "first done", no tool call: first completes, second starts

    relay.refresh_from_db()
    steps = dict(relay.steps.values_list("step_id", "status"))
    assert (steps["first"], steps["second"]) == (Step.Status.COMPLETED, Step.Status.RUNNING)
    forwarded = relay.messages.filter(sender="coordinator", recipient="second").get()
    assert "the subject is tides" in forwarded.content
    assert len(last) <= TOOL_LESS_TURN[vendor], f"a tool-less turn, {len(last)} statements:\n{_listed(last)}"
    assert len(sending) <= SENDING_TURN[vendor], f"a turn that sends, {len(sending)} statements:\n{_listed(sending)}"
    assert len(forwarding) <= FORWARD[vendor], f"a forward, {len(forwarding)} statements:\n{_listed(forwarding)}"


def test_a_runs_start_and_its_coordinators_finish_cost_no_more_statements_than_today(vendor, recorded_tasks):
    run = actions.do_create_run(register("single"), {})
    with statements() as starting:
        follow = actions.do_start_run(run.pk, leases.worker_identity())
    assert isinstance(follow, actions.EagerTurn)  # the first step, started and claimed for this worker
    actions.do_eager_turn(follow)  # "done": the step completes; the coordinator's wake is asked for
    with statements() as finishing:
        do_coordinator_wake(run.pk)

    run.refresh_from_db()
    assert (run.status, run.result) == (Run.Status.COMPLETED, "only: done")
    kinds = list(run.events.order_by("seq").values_list("type", flat=True))
    finish = ["agent_wake", "agent_turn", "tool_call", "coordinator_synthesis", "tool_call", "agent_idle"]
    finish.append("workflow_end")
    assert kinds[-len(finish) :] == finish, kinds
    assert len(starting) <= START[vendor], f"a run's start, {len(starting)} statements:\n{_listed(starting)}"
    assert len(finishing) <= FINISH[vendor], f"a finish wake, {len(finishing)} statements:\n{_listed(finishing)}"


def test_an_iteration_ending_while_the_step_after_its_loop_waits_costs_a_plain_turn(vendor, recorded_tasks):
    run = actions.do_create_run(register("scheduling/map_reduce"), {})
    actions.do_start_run(run.pk)  # the three iterations start, each with its turn queued
    ships = {step.step_id: step.pk for step in run.steps.filter(step_id__startswith="deploy[")}
    counts = []
    for step_id in ("deploy[0].ship", "deploy[1].ship"):
        with statements() as ending:
            do_step_turn(ships[step_id], 1)
        counts.append(len(ending))
        assert len(ending) <= MAP_TURN[vendor], f"{step_id}'s last turn, {len(ending)} statements:\n{_listed(ending)}"
    assert run.steps.get(step_id="report").status == Step.Status.PENDING
    do_step_turn(ships["deploy[2].ship"], 1)  # the last region: report starts

    assert run.steps.get(step_id="report").status == Step.Status.RUNNING
    assert counts[0] == counts[1]  # the second ending decides as cheaply as the first


def test_a_completion_under_a_cap_that_binds_decides_in_its_own_transaction(vendor, recorded_tasks):
    run = actions.do_create_run(register("scheduling/one_at_a_time"), {})
    follow = actions.do_start_run(run.pk, leases.worker_identity())
    assert isinstance(follow, actions.EagerTurn) and follow.step.step_id == "a"
    with statements() as ending:
        follow = actions.do_eager_turn(follow)

    steps = dict(run.steps.exclude(kind=Step.Kind.COORDINATOR).values_list("step_id", "status"))
    assert steps == {"a": Step.Status.COMPLETED, "b": Step.Status.RUNNING, "c": Step.Status.PENDING}
    assert len(ending) <= CAPPED_TURN[vendor], f"a capped turn, {len(ending)} statements:\n{_listed(ending)}"
    if vendor == "postgresql":
        assert ending.count("COMMIT") == 1, _listed(ending)
        assert isinstance(follow, actions.EagerTurn) and follow.step.step_id == "b"  # claimed for this worker
