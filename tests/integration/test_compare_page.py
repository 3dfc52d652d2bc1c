"""The compare page (issue #52): two runs side by side, each step's output
diffed, escaped; reached from a forked run's page and from the runs list.
And the run page's fork form."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.actions import do_create_run
from runs.actions.forks import do_fork_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(owner) -> Client:
    client = Client()
    client.force_login(owner)
    return client


def test_it_shows_the_changed_output_of_a_fork_diffed_and_escaped(celery_worker, owner, client):
    parent = wait_for_run(do_create_run(register("forks/chain"), {}, user=owner))
    fork = wait_for_run(do_fork_run(parent, "draft", user=owner, instructions="Draft <b>bold</b> tides."))

    page = client.get(f"/runs/compare/?a={parent.pk}&b={fork.pk}").content.decode()

    assert f"from #{parent.pk} at draft" in page
    draft = page.split('id="compare-draft"')[1].split('id="compare-check"')[0]
    assert 'data-changed="true"' in draft
    assert '<span class="diff-removed">-writer finished: Draft a note on tides.</span>' in draft
    assert '<span class="diff-added">+writer finished: Draft &lt;b&gt;bold&lt;/b&gt; tides.</span>' in draft
    gather = page.split('id="compare-gather"')[1].split('id="compare-draft"')[0]
    assert 'data-changed="false"' in gather and "completed · reused" in gather
    assert "run_shell ×1" in gather  # the first run's call; the fork made none
    assert "<b>bold</b>" not in page


def test_the_run_page_forks_a_run_and_links_the_fork_to_a_comparison(owner, client, django_capture_on_commit_callbacks):
    parent = do_create_run(register("forks/chain"), {}, user=owner)
    Run.objects.filter(pk=parent.pk).update(status=Run.Status.COMPLETED)
    Step.objects.create(run=parent, step_id="draft", agent="writer", position=2, instructions="Draft a note on $topic.")

    page = client.get(f"/runs/{parent.pk}/").content.decode()
    assert 'id="fork-run"' in page and '<option value="draft"' in page
    with django_capture_on_commit_callbacks():  # the fork's start task is not sent: no worker here
        response = client.post(f"/runs/{parent.pk}/fork/", {"step": "draft", "instructions": "Draft a list."})

    fork = Run.objects.get(forked_from=parent)
    assert response["Location"] == f"/runs/{fork.pk}/"
    assert (fork.fork_step, fork.fork_instructions) == ("draft", "Draft a list.")
    page = client.get(f"/runs/{fork.pk}/").content.decode()
    assert f'href="/runs/compare/?a={parent.pk}&amp;b={fork.pk}"' in page


def test_the_runs_list_compares_two_runs_it_names_and_refuses_others(owner, teammate, client):
    mine = do_create_run(register("forks/chain"), {}, user=owner)
    theirs = do_create_run(register("forks/chain"), {}, user=teammate)

    assert 'id="compare-runs"' in client.get("/").content.decode()
    assert client.get(f"/runs/compare/?a={mine.pk}&b={theirs.pk}").status_code == 404
    assert client.get(f"/runs/compare/?a={mine.pk}&b=x").status_code == 400
    assert client.get(f"/runs/compare/?a={mine.pk}&b=%23{mine.pk}").status_code == 200
