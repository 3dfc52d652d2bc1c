"""A worker takes a step's turn with its lease and the step loaded for it
(runs/leases.py claim_turn: one statement on PostgreSQL): only the next
turn of a running step of a running run, only if no other worker holds a
live lease. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import transaction

from runs import leases
from runs.actions import router_for
from runs.actions.tool_host import tool_env
from runs.models import Run, Step
from runs.store.sql import store

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_takes_the_next_turn_with_the_step_its_run_and_its_mail(two_step_run):
    run = two_step_run
    with transaction.atomic():
        store().lock_run(run.pk)
        router_for(run.pk).forward("s1", "read me")
    s1 = run.steps.get(step_id="s1")

    step = leases.claim_turn(s1.pk, 1, "w1:1:t")

    assert (step.step_id, step.run.pk, step.run.workflow.name, step.unread) == ("s1", run.pk, "store-sql", 1)
    s1.refresh_from_db()
    assert s1.lease_owner == "w1:1:t" and s1.lease_expires is not None


def test_a_leased_stale_or_stopped_turn_is_not_taken(two_step_run):
    run = two_step_run
    s1, s2 = run.steps.get(step_id="s1"), run.steps.get(step_id="s2")
    assert leases.claim_turn(s1.pk, 1, "w1:1:t") is not None

    assert leases.claim_turn(s1.pk, 1, "w2:2:t") is None  # another worker's live lease
    assert leases.claim_turn(s1.pk, 1, "w1:1:t") is not None  # its holder may take it again
    assert leases.claim_turn(s2.pk, 3, "w2:2:t") is None  # not the next turn
    Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED)
    assert leases.claim_turn(s2.pk, 1, "w2:2:t") is None  # the run stopped
    with pytest.raises(Step.DoesNotExist):
        leases.claim_turn(s2.pk + 1000, 1, "w2:2:t")


def test_the_step_comes_with_its_runs_creators_name_for_tool_calls(two_step_run, owner, django_assert_num_queries):
    Run.objects.filter(pk=two_step_run.pk).update(created_by=owner)
    step = leases.claim_turn(two_step_run.steps.get(step_id="s1").pk, 1, "w1:1:t")

    with django_assert_num_queries(0):  # loaded with the step, not asked for on each turn
        name = step.run.created_by.get_username()

    assert name == owner.username
    assert tool_env(step.run, step).injected["user"] == owner.username
