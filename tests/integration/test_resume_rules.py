"""When a forward to a finished step resumes it, and when it drops instead."""

from __future__ import annotations

import pytest

from runs import actions
from runs.models import Run, Step
from tests.conftest import register


@pytest.fixture
def finished_step(django_capture_on_commit_callbacks):
    """A running relay whose first step has completed with a transcript."""
    with django_capture_on_commit_callbacks(execute=False):
        run = actions.do_create_run(register("relay"), {"subject": "x"})
    with django_capture_on_commit_callbacks(execute=False):
        actions.do_start_run(run.pk)
    step = Step.objects.get(run=run, step_id="first")
    step.status = Step.Status.COMPLETED
    step.mailbox_closed_reason = "target-terminal"
    step.transcript = [{"role": "system", "content": "s"}, {"role": "assistant", "content": "done"}]
    step.save()
    return step


def forward(step: Step, *, kind: str = "info", finishing: bool = False, capture=None) -> str:
    with capture(execute=False):
        return actions.router_for(step.run_id, finishing=finishing).forward(step.step_id, "more?", kind).text


def dropped(step: Step) -> list[str]:
    return [e.data["reason"] for e in Run.objects.get(pk=step.run_id).events.filter(type="message_dropped")]


@pytest.mark.django_db
def test_it_resumes_a_completed_step(finished_step, django_capture_on_commit_callbacks):
    text = forward(finished_step, capture=django_capture_on_commit_callbacks)

    assert text.startswith("queued: msg-fwd-")
    finished_step.refresh_from_db()
    assert (finished_step.resuming, finished_step.resumes) == (True, 1)
    run = Run.objects.get(pk=finished_step.run_id)
    assert run.events.filter(type="resume_started", step_id="first").count() == 1
    assert dropped(finished_step) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"transcript": []}, "no-transcript"),
        ({"resumes": 10}, "max-wake-cycles"),
        ({"status": Step.Status.FAILED}, "target-terminal"),
    ],
)
def test_it_drops_instead_of_resuming(finished_step, django_capture_on_commit_callbacks, change, reason):
    Step.objects.filter(pk=finished_step.pk).update(**change)

    assert forward(finished_step, capture=django_capture_on_commit_callbacks) == f"dropped: {reason}"
    assert dropped(finished_step) == [reason]


@pytest.mark.django_db
def test_it_drops_a_transcript_over_the_cap(finished_step, django_capture_on_commit_callbacks, settings):
    settings.ZENWEB_MAX_TRANSCRIPT_BYTES = 20

    assert forward(finished_step, capture=django_capture_on_commit_callbacks) == "dropped: transcript-too-large"
    assert forward(finished_step, capture=django_capture_on_commit_callbacks) == "dropped: transcript-too-large"
    assert dropped(finished_step) == ["transcript-too-large", "transcript-too-large"]
    # zenflow's transcript_sealed, said once for the step.
    (sealed,) = Run.objects.get(pk=finished_step.run_id).events.filter(type="transcript_sealed", step_id="first")
    assert sealed.data["reason"] == "transcript-too-large"
    assert sealed.data["error"].startswith("its transcript is ")
    assert sealed.data["error"].endswith("past ZENWEB_MAX_TRANSCRIPT_BYTES (20): no resume reads it")


@pytest.mark.django_db
def test_a_forward_to_a_step_being_resumed_joins_its_resume_with_resume_queued(
    finished_step, django_capture_on_commit_callbacks
):
    first = forward(finished_step, capture=django_capture_on_commit_callbacks)
    second = forward(finished_step, capture=django_capture_on_commit_callbacks)

    assert first.startswith("queued: ") and second.startswith("queued: ")
    run = Run.objects.get(pk=finished_step.run_id)
    assert run.events.filter(type="resume_started", step_id="first").count() == 1
    (joined,) = run.events.filter(type="resume_queued", step_id="first")
    assert joined.data == {"message_id": second.removeprefix("queued: "), "sender": "coordinator", "resume": 1}


@pytest.mark.django_db
def test_it_drops_during_the_final_wake_as_resume_shutdown(finished_step, django_capture_on_commit_callbacks):
    text = forward(finished_step, finishing=True, capture=django_capture_on_commit_callbacks)

    assert text == "dropped: resume-shutdown"
    assert dropped(finished_step) == ["resume-shutdown"]


@pytest.mark.django_db
def test_it_never_resumes_for_a_resume_reply(finished_step, django_capture_on_commit_callbacks):
    text = forward(finished_step, kind="resume_reply", capture=django_capture_on_commit_callbacks)

    assert text == "dropped: target-terminal"
    finished_step.refresh_from_db()
    assert finished_step.resumes == 0
