"""Timeouts: past options.timeout a run ends failed, past options.stepTimeout
a step fails and the failure policy applies. Both are checked before a
turn is recorded, and by the sweeper while a model call goes on; the answer
that comes back late is neither acted on nor recorded."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.router import COORDINATOR
from agents.spec import WorkflowOptions
from runs import sweeper
from runs.actions import do_create_run, do_register_workflow
from runs.actions.approvals import ApprovalError, do_decide
from runs.actions.deadlines import do_enforce_step_timeouts
from runs.actions.steps import do_step_turn
from runs.models import Approval, Run, Step, ToolCall
from runs.store import last_turn
from tests.conftest import assert_gapless, event_types, register, wait_for, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def start(name: str, user=None) -> Run:
    return do_create_run(register(f"timeouts/{name}"), {}, user=user)


def sleep_until(moment: datetime) -> None:
    time.sleep(max(0.0, (moment - timezone.now()).total_seconds()))


def in_model_call(run: Run, step_id: str) -> Step:
    """The step once a worker holds its first turn (its model is answering)."""
    return wait_for(lambda: run.steps.filter(step_id=step_id, turns=0).exclude(lease_owner="").first())


def test_it_fails_a_run_past_its_timeout(celery_worker):
    run = wait_for_run(start("slow_run"))

    assert run.status == Run.Status.FAILED
    assert re.fullmatch(r"run timed out: ran \d+\.\ds, options\.timeout is 0\.5s", run.error)
    s1 = run.steps.get(step_id="s1")
    assert (s1.status, s1.turns, s1.output) == (Step.Status.CANCELLED, 0, "")
    assert event_types(run)[-2:] == ["error", "workflow_end"]
    assert "agent_turn" not in event_types(run, step_id="s1")
    assert_gapless(run)


def test_it_fails_a_step_past_its_step_timeout_and_applies_the_failure_policy(celery_worker):
    run = wait_for_run(start("slow_step"))

    steps = {step.step_id: step for step in run.steps.exclude(kind=Step.Kind.COORDINATOR)}
    assert {step_id: step.status for step_id, step in steps.items()} == {
        "slow": Step.Status.FAILED,
        "after": Step.Status.SKIPPED,
        "quick": Step.Status.COMPLETED,
    }
    assert re.fullmatch(r"step slow ran \d+\.\ds, past options\.stepTimeout \(0\.5s\)", steps["slow"].error)
    # The late answer was not recorded as the step's.
    assert (steps["slow"].turns, steps["slow"].output) == (0, "")
    assert event_types(run, step_id="slow") == ["step_start", "error"]
    assert run.status == Run.Status.PARTIAL
    assert run.error == f"step slow failed: {steps['slow'].error}"


def test_it_fails_a_step_stuck_in_a_model_call_on_a_sweep_and_drops_its_late_answer(celery_worker):
    run = start("stuck_step")
    s1 = in_model_call(run, "s1")
    sleep_until(s1.started + timedelta(seconds=0.6))

    assert sweeper.do_sweep()["steps_timed_out"] == 1

    # Failed while its model is still answering.
    s1.refresh_from_db()
    assert s1.status == Step.Status.FAILED
    assert re.fullmatch(r"step s1 ran \d+\.\ds, past options\.stepTimeout \(0\.5s\)", s1.error)
    run = wait_for_run(run)
    assert run.status == Run.Status.FAILED
    sleep_until(s1.started + timedelta(seconds=2))  # the answer came back meanwhile
    s1.refresh_from_db()
    assert (s1.status, s1.turns, s1.output) == (Step.Status.FAILED, 0, "")
    assert event_types(run, step_id="s1") == ["step_start", "error"]
    assert event_types(run)[-1] == "workflow_end"


def test_it_fails_a_run_past_its_timeout_on_a_sweep_while_a_model_call_goes_on(celery_worker):
    run = start("stuck_run")
    s1 = in_model_call(run, "s1")
    run.refresh_from_db()
    sleep_until(run.started + timedelta(seconds=0.6))

    assert sweeper.do_sweep()["over_budget"] == 1

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert re.fullmatch(r"run timed out: ran \d+\.\ds, options\.timeout is 0\.5s", run.error)
    sleep_until(s1.started + timedelta(seconds=2))  # the answer came back meanwhile
    s1.refresh_from_db()
    assert (s1.status, s1.turns, s1.output) == (Step.Status.CANCELLED, 0, "")
    assert "agent_turn" not in event_types(run, step_id="s1")
    assert event_types(run)[-1] == "workflow_end"


def test_it_lapses_the_approval_a_timed_out_step_waited_for(celery_worker, owner, approver):
    run = start("gated_step", owner)
    approval = wait_for(lambda: run.approvals.filter(status=Approval.Status.PENDING).first())
    build = run.steps.get(step_id="build")
    sleep_until(build.started + timedelta(seconds=0.6))

    assert sweeper.do_sweep()["steps_timed_out"] == 1

    approval.refresh_from_db()
    assert (approval.status, approval.reason) == (Approval.Status.LAPSED, "step build failed")
    with pytest.raises(ApprovalError, match="is already lapsed"):
        do_decide(approval.pk, approver, "approve", "too late")
    assert run.tool_calls.get(name="run_shell").status == ToolCall.Status.BLOCKED
    run = wait_for_run(run)
    assert run.status == Run.Status.PARTIAL
    assert run.steps.get(step_id="build").error.startswith("step build ran ")
    assert event_types(run, step_id="build")[-3:] == ["error", "approval_lapsed", "tool_result"]


def test_it_counts_approval_waits_against_the_run_timeout(celery_worker, owner):
    run = start("gated_run", owner)
    approval = wait_for(lambda: run.approvals.filter(status=Approval.Status.PENDING).first())
    run.refresh_from_db()
    sleep_until(run.started + timedelta(seconds=0.6))

    assert sweeper.do_sweep()["over_budget"] == 1

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("run timed out: ran ")
    approval.refresh_from_db()
    assert (approval.status, approval.reason) == (Approval.Status.LAPSED, "the run ended failed")


# On SQLite and on PostgreSQL (two_step_run): the sweep's query, the claim
# and the two writers of a turn.

SLOW_STEPS = """\
name: slow-steps
options: {stepTimeout: 0.5}
agents:
  worker:
    description: worker agent
    script:
      - {say: "too late", delay: 2.5}
steps:
  - {id: s1, agent: worker}
  - {id: s2, agent: worker}
"""


@pytest.fixture
def slow_run(two_step_run) -> Run:
    """two_step_run of a workflow whose steps may take half a second and
    whose model answers after 2.5 s (the sweep at 0.6 s must come first,
    on a loaded machine too): s1 started now, s2 waits."""
    workflow, _ = do_register_workflow(SLOW_STEPS, __file__)
    Run.objects.filter(pk=two_step_run.pk).update(workflow=workflow, started=timezone.now())
    Step.objects.filter(run=two_step_run, step_id="s1").update(started=timezone.now())
    Step.objects.filter(run=two_step_run, step_id="s2").update(status=Step.Status.PENDING)
    return Run.objects.get(pk=two_step_run.pk)


def test_it_fails_only_the_steps_past_the_step_timeout_on_a_sweep(two_step_run):
    five_seconds_ago = timezone.now() - timedelta(seconds=5)
    Step.objects.filter(run=two_step_run).exclude(step_id="s2").update(started=five_seconds_ago)
    Step.objects.filter(run=two_step_run, step_id=COORDINATOR).update(status=Step.Status.RUNNING)
    Step.objects.filter(run=two_step_run, step_id="s2").update(started=timezone.now())
    options = WorkflowOptions(step_timeout=1)

    assert do_enforce_step_timeouts(two_step_run.pk, options) == 1
    assert do_enforce_step_timeouts(two_step_run.pk, options) == 0

    steps = {step.step_id: step for step in two_step_run.steps.all()}
    assert steps["s1"].status == Step.Status.FAILED
    assert steps["s1"].error == "step s1 ran 5.0s, past options.stepTimeout (1s)"
    # The coordinator lives as long as its run.
    assert (steps["s2"].status, steps[COORDINATOR].status) == (Step.Status.RUNNING, Step.Status.RUNNING)


def test_it_records_nothing_of_a_turn_whose_step_timed_out_during_its_model_call(slow_run):
    s1 = slow_run.steps.get(step_id="s1")
    failures = []

    def take_turn():
        try:
            do_step_turn(s1.pk, 1)
        except Exception as exc:  # noqa: BLE001 - reported below, in the test's thread
            failures.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=take_turn)
    worker.start()
    in_model_call(slow_run, "s1")
    sleep_until(s1.started + timedelta(seconds=0.6))
    assert sweeper.do_sweep()["steps_timed_out"] == 1
    worker.join()

    assert failures == []
    s1.refresh_from_db()
    assert (s1.status, s1.turns, s1.output, s1.transcript) == (Step.Status.FAILED, 0, "", [])
    assert event_types(slow_run, step_id="s1") == ["error"]


@pytest.mark.services
def test_it_writes_no_last_turn_in_one_trip_for_a_step_that_timed_out(pg_run):
    Step.objects.filter(run=pg_run).update(started=timezone.now() - timedelta(seconds=5))
    do_enforce_step_timeouts(pg_run.pk, WorkflowOptions(step_timeout=1))
    s1 = pg_run.steps.get(step_id="s1")

    completed = {"status": Step.Status.COMPLETED, "output": "too late", "finished": timezone.now()}
    assert last_turn.write(s1, 1, [{"role": "assistant", "content": "too late"}], (7, 3), completed, []) is None

    s1.refresh_from_db()
    assert (s1.status, s1.turns, s1.output) == (Step.Status.FAILED, 0, "")


def test_a_coordinator_answer_that_comes_back_after_the_run_ended_is_not_recorded(celery_worker):
    from runs.actions import do_cancel_run

    run = do_create_run(register("coordinator/slow_plan"), {})
    wait_for(lambda: run.events.filter(type="agent_wake", step_id=COORDINATOR).exists())
    do_cancel_run(run.pk, "cancelled while the coordinator thought")
    time.sleep(2.0)  # the planning call (1.5 s) came back meanwhile

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert event_types(run)[-1] == "workflow_end"
    assert not run.steps.exclude(step_id=COORDINATOR).exists()  # no worker spawned
    assert run.steps.get(step_id=COORDINATOR).transcript == []
