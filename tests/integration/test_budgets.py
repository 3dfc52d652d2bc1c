"""Run budgets: past its tokens, tool calls or wall time a run ends failed
with the budget named; time waiting for an approval is not counted."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.prices import parse_prices
from runs.actions import do_create_run
from runs.actions.budgets import working_time
from runs.actions.deadlines import budget_breach
from runs.models import Approval, Run
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_fails_a_run_past_its_token_budget(celery_worker):
    run = wait_for_run(do_create_run(register("budgets/tokens"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("budget exceeded: ")
    assert run.error.endswith("tokens used, the budget is 50 (options.budget.tokens)")


def test_it_fails_a_run_past_its_tool_call_budget(celery_worker):
    run = wait_for_run(do_create_run(register("budgets/tool_calls"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error == "budget exceeded: 2 tool calls made, the budget is 1 (options.budget.toolCalls)"


def test_it_does_not_count_time_waiting_for_approval(owner):
    workflow = register("approvals/gated")
    started = timezone.now() - timedelta(hours=2)
    run = Run.objects.create(workflow=workflow, created_by=owner, status="running", started=started)
    approval = Approval.objects.create(run=run, kind="tool", what="x", why="y", arguments={}, arguments_hash="0" * 64)
    Approval.objects.filter(pk=approval.pk).update(
        created=started + timedelta(minutes=10), decided_at=started + timedelta(minutes=70), status="approved"
    )

    spent = working_time(run)

    assert timedelta(minutes=59) < spent < timedelta(minutes=61)


def test_it_names_the_wall_time_budget(owner, tmp_path):
    path = tmp_path / "slow.yaml"
    path.write_text(
        "name: slow\noptions: {budget: {wallTime: 60}}\n"
        "agents: {a: {description: a agent}}\nsteps: [{id: s, agent: a}]\n"
    )
    from runs.actions import do_register_workflow

    workflow, _ = do_register_workflow(path.read_text(), str(path))
    run = Run.objects.create(
        workflow=workflow, created_by=owner, status="running", started=timezone.now() - timedelta(minutes=5)
    )

    assert budget_breach(run).startswith("budget exceeded: ran 300")
    assert budget_breach(run).endswith("the budget is 60s (options.budget.wallTime; approval waits excluded)")


def test_it_fails_a_run_past_its_budget_in_money(celery_worker, settings):
    # 1,000 per million tokens: the scripted answers' tens of tokens pass 0.01.
    settings.ZENWEB_MODEL_PRICES = parse_prices('{"scripted": {"prompt": 1000, "completion": 1000}}')

    run = wait_for_run(do_create_run(register("budgets/cost"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error.startswith("budget exceeded: cost 0.")
    assert run.error.endswith(", the budget is 0.01 (options.budget.cost)")


def test_a_budget_in_money_with_no_price_for_its_model_fails_the_run_saying_so(celery_worker, settings):
    settings.ZENWEB_MODEL_PRICES = {}

    run = wait_for_run(do_create_run(register("budgets/cost"), {}))

    assert run.status == Run.Status.FAILED
    assert run.error == "budget cannot be kept: no price for scripted in ZENWEB_MODEL_PRICES (options.budget.cost)"
