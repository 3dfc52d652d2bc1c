"""`manage.py serve`'s demo: besides its demo runs it types a command, as a
person would, so a fresh `make run` shows a workflow picked from the catalog
and a run that records claims with their sources."""

from __future__ import annotations

import io

import pytest
from django.conf import settings

from runs.actions import do_load_catalog
from runs.management.commands.serve import DEMO_COMMAND, Command
from runs.models import Command as CommandRow
from tests.conftest import wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def demo_command(user) -> str:
    out = io.StringIO()
    Command(stdout=out)._demo_command(user, "http://127.0.0.1:8000")
    return out.getvalue()


def test_it_starts_the_research_workflow_from_the_demo_command_and_gets_claims(celery_worker, owner):
    do_load_catalog(settings.ZENWEB_CATALOG_DIR)

    printed = demo_command(owner)

    command = CommandRow.objects.get()
    assert command.text == DEMO_COMMAND
    assert printed.strip().endswith(f"started http://127.0.0.1:8000/runs/{command.run_id}/ (research)")
    run = wait_for_run(command.run)
    assert run.status == "completed"
    assert {claim.source_ref for claim in run.claims.all()} == {"shop-aster-swift-14", "rev-aster-swift-14"}


def test_it_says_why_when_the_catalog_cannot_answer_the_demo_command(owner):
    printed = demo_command(owner)

    assert "started no run:" in printed
    assert not CommandRow.objects.exclude(run=None).exists()
