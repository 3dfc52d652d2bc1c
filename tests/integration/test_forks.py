"""Forking a run from one of its steps (issue #52): what comes before the
fork point is the first run's, reused without asking a model or running a
tool again; the fork step, with its edited instructions, and what follows
run again."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.actions.catalog import InputError
from runs.actions.forks import do_fork_run
from runs.graph import routing_graph
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def parent(celery_worker) -> Run:
    run = wait_for_run(do_create_run(register("forks/chain"), {}))
    assert run.status == Run.Status.COMPLETED
    return run


def effects(settings, run: Run):
    log = settings.ZENWEB_WORKSPACES / f"run-{run.pk}" / "effects.log"
    return log.read_text().split() if log.exists() else None


def outputs(run: Run) -> dict[str, str]:
    return dict(run.steps.filter(kind=Step.Kind.STEP).values_list("step_id", "output"))


def stepped_events(run: Run, type_: str) -> list[str]:
    return list(run.events.filter(type=type_).order_by("seq").values_list("step_id", flat=True))


def test_a_fork_at_the_second_step_reuses_the_first_and_runs_the_rest_with_the_edit(parent, settings):
    fork = wait_for_run(do_fork_run(parent, "draft", instructions="Draft a limerick on tides."))

    assert fork.status == Run.Status.COMPLETED
    assert (fork.forked_from, fork.fork_step) == (parent, "draft")
    assert outputs(fork) == {
        "gather": "gathered",  # the first run's, its shell command not run again
        "draft": "writer finished: Draft a limerick on tides.",
        "check": outputs(parent)["check"],
    }
    gather = fork.steps.get(step_id="gather")
    assert gather.reused_from == parent.steps.get(step_id="gather")
    assert (gather.prompt_tokens, gather.completion_tokens) == (0, 0)
    assert stepped_events(fork, "step_reused") == ["gather"]
    assert stepped_events(fork, "step_start") == ["draft", "check"]
    assert "gather" not in stepped_events(fork, "tool_call")
    assert effects(settings, fork) is None
    assert effects(settings, parent) == ["once"]
    details = {node.id: node.detail for node in routing_graph(fork).nodes}
    assert (details["gather"], details["draft"]) == ("gatherer · reused", "writer")
    reused = fork.events.get(type="step_reused").data
    assert reused == {"from_run": parent.pk, "from_step": "gather", "output": "gathered"}


def test_a_fork_at_the_last_step_runs_only_that_step(parent):
    fork = wait_for_run(do_fork_run(parent, "check"))

    assert fork.status == Run.Status.COMPLETED
    assert stepped_events(fork, "step_reused") == ["gather", "draft"]
    assert stepped_events(fork, "step_start") == ["check"]
    assert outputs(fork) == outputs(parent)


def test_a_fork_at_the_first_step_reuses_nothing_and_runs_its_tools_again(parent, settings):
    fork = wait_for_run(do_fork_run(parent, "gather", inputs={"topic": "storms"}))

    assert fork.status == Run.Status.COMPLETED
    assert fork.inputs == {"topic": "storms"}
    assert stepped_events(fork, "step_reused") == []
    assert stepped_events(fork, "step_start") == ["gather", "draft", "check"]
    assert effects(settings, fork) == ["once"]
    assert fork.steps.get(step_id="gather").reused_from is None


def test_a_step_after_one_that_ran_again_is_not_reused_even_before_the_fork_point(parent):
    # The step before the fork point whose work changed (here: a step the
    # first run did not complete) runs again, and so does what depends on it.
    parent.steps.filter(step_id="gather").update(status=Step.Status.FAILED)

    fork = wait_for_run(do_fork_run(parent, "check"))

    assert stepped_events(fork, "step_reused") == []
    assert stepped_events(fork, "step_start") == ["gather", "draft", "check"]


def test_it_refuses_to_fork_a_run_under_way_or_at_a_step_it_does_not_have(parent):
    # A worker the coordinator spawned is not a step of the workflow to fork at.
    Step.objects.create(run=parent, step_id="w1", agent="writer", position=9, spawned_by="call-1")
    with pytest.raises(InputError, match=r"has no step 'w1' to fork at \(its steps: gather, draft, check\)"):
        do_fork_run(parent, "w1")
    with pytest.raises(InputError, match=r"has no step 'drafts' to fork at \(its steps: gather, draft, check\)"):
        do_fork_run(parent, "drafts")
    parent.status = Run.Status.RUNNING
    with pytest.raises(InputError, match=r"is running: only a run that has ended can be forked"):
        do_fork_run(parent, "draft")
    parent.status = Run.Status.COMPLETED
    with pytest.raises(InputError, match=r"instructions for step 'draft': 20001 characters, at most 20000"):
        do_fork_run(parent, "draft", instructions="x" * 20_001)
    assert not Run.objects.filter(forked_from=parent).exists()
