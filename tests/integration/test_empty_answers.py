"""Empty answers with the scripted model: options.maxEmptyAnswerRetries is
how many hints a step's model gets before its empty answer fails the step."""

from __future__ import annotations

import pytest

from runs.actions import do_create_run
from runs.models import Run, Step
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_fails_a_step_at_its_first_empty_answer_with_no_retries_allowed(celery_worker):
    run = wait_for_run(do_create_run(register("policy/mute"), {}))

    mute = run.steps.get(step_id="mute")
    assert (mute.status, mute.error, mute.turns) == (Step.Status.FAILED, "empty answer from the model", 1)
    talker = run.steps.get(step_id="talker")
    # Whitespace is no answer either: with no retry allowed it fails too.
    assert (talker.status, talker.error) == (Step.Status.FAILED, "empty answer from the model")
    assert run.status == Run.Status.FAILED
    assert run.error == "step mute failed: empty answer from the model\nstep talker failed: empty answer from the model"
    error_events = run.events.filter(type="error", step_id="mute")
    assert [event.data["error"] for event in error_events] == ["empty answer from the model"]
