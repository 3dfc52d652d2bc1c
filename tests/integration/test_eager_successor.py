"""A chained step's successor, started in the round trip that completes the
step (runs/actions/scheduling.py eager_successor, runs/store/sql/turns.py
write_last_turn): the worker guesses it from the run's step rows it read
before, and the write checks the guess under the run's lock before it
starts anything. And start_and_claim_step's conditions, on both databases.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.router import COORDINATOR
from runs import actions, leases
from runs.actions.scheduling import EagerTurn, successor
from runs.actions.steps import do_eager_turn
from runs.models import Message, Run, Step
from runs.store.sql import store
from tests.conftest import register
from tests.integration.test_statement_counts import statements

pytestmark = pytest.mark.django_db(transaction=True)


def _status(run: Run) -> dict[str, str]:
    return dict(run.steps.values_list("step_id", "status"))


@pytest.mark.services
def test_a_chained_step_starts_its_successor_in_the_round_trip_that_completes_it(recorded_tasks):
    run = actions.do_create_run(register("durability/quick_chain"), {})
    worker = leases.worker_identity()
    first = actions.do_start_run(run.pk, worker)
    assert isinstance(first, EagerTurn) and first.step.step_id == "one" and first.rows is not None
    recorded_tasks.clear()  # the run's start

    with statements() as sent:
        follow = do_eager_turn(first)

    assert isinstance(follow, EagerTurn) and follow.step.step_id == "two"
    two = run.steps.get(step_id="two")
    assert (two.status, two.lease_owner, two.turn_queued) == (Step.Status.RUNNING, worker, None)
    assert _status(run)["one"] == Step.Status.COMPLETED
    # The run's lock, the turn written, the successor started: one pipeline, no other statement.
    assert len(sent) == 3, "\n".join(sent)
    assert "FOR UPDATE" in sent[0] and sent[2].startswith("WITH s AS (UPDATE")
    events = list(run.events.order_by("seq").values_list("type", "step_id"))
    assert events[-3:] == [("agent_turn", "one"), ("step_end", "one"), ("step_start", "two")]
    assert recorded_tasks == []  # nothing through the broker

    assert do_eager_turn(follow) is not None  # two's completion asks for the finish wake
    assert set(_status(run).values()) == {Step.Status.COMPLETED, Step.Status.RUNNING}  # the coordinator runs on


@pytest.mark.services
def test_the_successor_waits_while_the_coordinator_is_busy(recorded_tasks):
    run = actions.do_create_run(register("durability/quick_chain"), {})
    first = actions.do_start_run(run.pk, leases.worker_identity())
    Run.objects.filter(pk=run.pk).update(coordinator_busy=True)

    assert do_eager_turn(first) is None

    assert _status(run)["one"] == Step.Status.COMPLETED
    assert _status(run)["two"] == Step.Status.PENDING  # its dependents wait for the coordinator
    assert not run.events.filter(type="step_start", step_id="two").exists()


@pytest.mark.services
def test_a_turn_another_worker_recorded_starts_nothing_here(recorded_tasks):
    run = actions.do_create_run(register("durability/quick_chain"), {})
    first = actions.do_start_run(run.pk, leases.worker_identity())
    # This worker's lease ran out and another one recorded the turn first.
    Step.objects.filter(run=run, step_id="one").update(status=Step.Status.COMPLETED, turns=1, finished=timezone.now())

    assert do_eager_turn(first) is None

    # Its write did not happen, so the successor it guessed is not started
    # here (and left to the worker that recorded the turn).
    assert _status(run)["two"] == Step.Status.PENDING
    assert not run.events.filter(type="step_start", step_id="two").exists()


@pytest.mark.services
def test_a_step_that_also_waited_for_one_that_ended_meanwhile_starts_too(recorded_tasks):
    run = actions.do_create_run(register("scheduling/join_after_side"), {})
    actions.do_start_run(run.pk)  # one and side start, their turns recorded_tasks
    worker = leases.worker_identity()
    one = leases.claim_turn(run.steps.get(step_id="one").pk, 1, worker)
    rows = store().step_rows(run.pk)  # side running, as this worker read it
    # side ends meanwhile, and the scheduling after it found one still running.
    Step.objects.filter(run=run, step_id="side").update(status=Step.Status.COMPLETED, finished=timezone.now())
    recorded_tasks.clear()

    follow = do_eager_turn(EagerTurn(one, {}, rows))

    assert isinstance(follow, EagerTurn) and follow.step.step_id == "two"  # the guess, started and claimed
    status = _status(run)
    assert (status["two"], status["join"]) == (Step.Status.RUNNING, Step.Status.RUNNING)
    join = run.steps.get(step_id="join")
    assert recorded_tasks == [("runs.tasks.run_step_turn", (join.pk, 1))]  # join's first turn, recorded_tasks


def test_start_and_claim_step_starts_only_a_ready_step(vendor, recorded_tasks):
    run = actions.do_create_run(register("durability/quick_chain"), {})
    actions.do_start_run(run.pk)
    one, two = (run.steps.get(step_id=step_id) for step_id in ("one", "two"))

    def start() -> tuple | None:
        return store().start_and_claim_step(run.pk, successor(store().step_rows(run.pk)[1], "w1"))

    assert start() is None  # one has not completed
    Step.objects.filter(pk=one.pk).update(status=Step.Status.COMPLETED)
    Run.objects.filter(pk=run.pk).update(coordinator_busy=True)
    assert start() is None  # the coordinator is busy
    Run.objects.filter(pk=run.pk).update(coordinator_busy=False)
    mail = Message.objects.create(run=run, message_id="m-1", sender="one", recipient=COORDINATOR, type="message")
    assert start() is None  # the coordinator has mail to route first
    Message.objects.filter(pk=mail.pk).update(drained=timezone.now())

    started = start()

    assert started is not None
    loaded, seq = started
    assert (loaded.pk, loaded.status, loaded.lease_owner, loaded.run.pk) == (two.pk, Step.Status.RUNNING, "w1", run.pk)
    assert run.events.get(seq=seq).type == "step_start"
    assert start() is None  # once


@pytest.mark.services
def test_a_step_that_spends_the_budget_starts_no_successor(recorded_tasks):
    run = actions.do_create_run(register("scheduling/budgeted_chain"), {})
    first = actions.do_start_run(run.pk, leases.worker_identity())

    assert do_eager_turn(first) is None

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and "budget" in run.error, (run.status, run.error)
    # Its budget was spent before the second step could start: it never did.
    assert not run.events.filter(type="step_start", step_id="two").exists()
    assert _status(run)["two"] != Step.Status.RUNNING
