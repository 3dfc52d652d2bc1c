"""Ending a run whose steps are all done (do_finish_run): zenflow's status
rule, read from the steps in one query however many there are."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.router import COORDINATOR
from runs.actions import do_coordinator_wake, do_finish_run, do_register_workflow
from runs.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

WORKFLOW = (
    "name: finish\nagents:\n  worker: {description: worker agent, provider: scripted}\n"
    "steps:\n  - {id: only, agent: worker}\n"
)


def _run_with(statuses: list[str]) -> Run:
    workflow, _ = do_register_workflow(WORKFLOW, "tests/integration/test_finish_run.py")
    run = Run.objects.create(workflow=workflow, status=Run.Status.RUNNING, started=timezone.now())
    Step.objects.create(run=run, step_id=COORDINATOR, kind=Step.Kind.COORDINATOR, agent=COORDINATOR)
    Step.objects.bulk_create(
        Step(run=run, step_id=f"s{n}", agent="worker", position=n, status=status, error=f"s{n} broke")
        for n, status in enumerate(statuses)
    )
    return run


# The most queries each may take, as they do today (on SQLite, where these run).
FINISH_QUERIES = 12
# The first wake loads what later ones find loaded: one query more than they take.
FINISH_WAKE_QUERIES = 29


def _queries_to_finish(run: Run, django_assert_max_num_queries) -> int:
    with django_assert_max_num_queries(FINISH_QUERIES) as captured:
        do_finish_run(run.pk)
    return len(captured)


def test_it_reads_the_steps_once_however_many_there_are(django_assert_max_num_queries):
    do_finish_run(_run_with([Step.Status.COMPLETED]).pk)  # what the first finish loads once
    few = _queries_to_finish(_run_with([Step.Status.COMPLETED] * 2), django_assert_max_num_queries)
    many = _queries_to_finish(_run_with([Step.Status.COMPLETED] * 30), django_assert_max_num_queries)

    assert many == few


def test_a_failed_step_makes_the_run_partial_and_says_why():
    run = _run_with([Step.Status.COMPLETED, Step.Status.FAILED, Step.Status.SKIPPED])

    do_finish_run(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.PARTIAL
    assert run.error == "step s1 failed: s1 broke"
    assert run.events.order_by("-seq").first().type == "workflow_end"


def _queries_to_wake(run: Run, django_assert_max_num_queries) -> int:
    Step.objects.filter(run=run).exclude(step_id=COORDINATOR).update(output="done", instructions="Do it.")
    with django_assert_max_num_queries(FINISH_WAKE_QUERIES) as captured:
        do_coordinator_wake(run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
    return len(captured)


def test_the_finish_wake_reads_the_steps_once_however_many_there_are(django_assert_max_num_queries):
    # It reads only some fields of each step: touching another would cost a
    # query per step.
    _queries_to_wake(_run_with([Step.Status.COMPLETED]), django_assert_max_num_queries)  # loads what is loaded once
    few = _queries_to_wake(_run_with([Step.Status.COMPLETED] * 2), django_assert_max_num_queries)
    many = _queries_to_wake(_run_with([Step.Status.COMPLETED] * 30), django_assert_max_num_queries)

    assert many == few
