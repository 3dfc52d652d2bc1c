"""A step asks a person (ask_person): it waits, the question is answered
over the API by whoever may, and the step finishes with the answer; a wait
that times out, or a run cancelled, ends it without one. Those that take
``vendor`` run on both databases (the answer locks rows)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from runs.actions import do_cancel_run, do_create_run
from runs.actions.approvals import ApprovalError, do_decide
from runs.actions.catalog import workflow_spec
from runs.actions.deadlines import do_enforce_step_timeouts, step_timeout_breach
from runs.actions.notifications import do_email_approvers
from runs.actions.questions import do_lapse_expired_questions
from runs.models import Approval, Run, Step, ToolCall
from runs.sweeper import do_sweep
from tests.conftest import event_types, register, wait_for, wait_for_run
from tests.integration.api_client import api, post

pytestmark = pytest.mark.django_db(transaction=True)


def asked(run: Run) -> Approval:
    """The run's question, once its call waits for it."""
    call = wait_for(lambda: ToolCall.objects.filter(run=run, name="ask_person", status="waiting").first())
    return Approval.objects.get(tool_call=call)


def test_a_step_waits_for_the_answer_given_over_the_api_and_finishes_with_it(vendor, celery_worker, owner):
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    question = asked(run)
    client = api(owner)

    [listed] = client.get("/api/questions").json()["questions"]
    assert listed | {"asked_at": None, "expires_at": None} == {
        "id": question.pk,
        "run": run.pk,
        "workflow": "ask_colour",
        "step_id": "paint",
        "tool_call_id": "call-painter-1-1",
        "status": "pending",
        "question": "Which colour should the <b>fence</b> be?",
        "options": ["red", "blue"],
        "asked_at": None,
        "expires_at": None,
        "answer": None,
        "answered_by": None,
        "answered_at": None,
        "reason": "",
        "may_answer": True,
        "hidden_characters": False,
        "escaped": {"question": "Which colour should the <b>fence</b> be?", "options": ["red", "blue"]},
    }
    run.refresh_from_db()
    assert run.status == "running" and run.steps.get(step_id="paint").status == "running"
    assert "waiting_for_input" in event_types(run, step_id="paint")

    refused = post(client, f"/api/questions/{question.pk}/answer", {"answer": "green"})
    assert (refused.status_code, refused.json()) == (409, {"error": "the answer must be one of the options: red, blue"})
    answered = post(client, f"/api/questions/{question.pk}/answer", {"answer": "blue"})
    assert answered.status_code == 200
    assert (answered.json()["status"], answered.json()["answer"], answered.json()["answered_by"]) == (
        "answered",
        "blue",
        "owner",
    )

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    output = run.steps.get(step_id="paint").output
    assert json.loads(output.removeprefix("painted with ")) == {
        "answered": True,
        "answer": "blue",
        "answered_by": "owner",
    }
    received = run.events.get(type="input_received")
    assert (received.data["by"], received.data["answer"], received.step_id) == ("owner", "blue", "paint")
    again = post(client, f"/api/questions/{question.pk}/answer", {"answer": "red"})
    assert (again.status_code, again.json()) == (409, {"error": f"question {question.pk} is already answered"})


def test_a_plain_user_cannot_see_or_answer_someone_elses_question_and_an_approver_can(
    celery_worker, owner, teammate, approver, staff
):
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    question = asked(run)

    assert api(teammate).get("/api/questions").json()["questions"] == []
    stranger = post(api(teammate), f"/api/questions/{question.pk}/answer", {"answer": "red"})
    assert (stranger.status_code, stranger.json()) == (404, {"error": f"question {question.pk} not found"})
    # Staff see every run, but answering is for its starter and approvers.
    onlooker = post(api(staff), f"/api/questions/{question.pk}/answer", {"answer": "red"})
    assert onlooker.status_code == 403
    # A question is answered, not approved.
    with pytest.raises(ApprovalError, match="is a question"):
        do_decide(question.pk, approver, "approve", "fine")

    assert post(api(approver), f"/api/questions/{question.pk}/answer", {"answer": "red"}).status_code == 200
    run = wait_for_run(run)
    assert '"answered_by":"approver"' in run.steps.get(step_id="paint").output


def test_an_unanswered_question_lapses_and_the_step_goes_on_without_an_answer(vendor, celery_worker, owner):
    run = do_create_run(register("ask/ask_free"), {}, user=owner)
    question = asked(run)

    Approval.objects.filter(pk=question.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert do_lapse_expired_questions() == 1

    run = wait_for_run(run)
    assert run.status == Run.Status.COMPLETED
    result = json.loads(run.steps.get(step_id="ask").output.removeprefix("called "))
    assert result["answered"] is False
    assert "ZENWEB_ASK_PERSON_TIMEOUT" in result["reason"]
    question.refresh_from_db()
    assert question.status == "lapsed"


def test_waiting_for_an_answer_does_not_count_against_the_step_timeout(celery_worker, owner):
    run = do_create_run(register("ask/ask_free"), {}, user=owner)
    question = asked(run)
    step = run.steps.get(step_id="ask")
    options = workflow_spec(run.workflow).options
    # Ten minutes in, all but a second of it waiting: stepTimeout (2 s) is not reached.
    started = timezone.now() - timedelta(minutes=10)
    Step.objects.filter(pk=step.pk).update(started=started)
    Approval.objects.filter(pk=question.pk).update(created=started + timedelta(seconds=1))
    step.refresh_from_db()

    assert step_timeout_breach(step, options) is None
    assert do_enforce_step_timeouts(run.pk, options) == 0
    # The same ten minutes spent otherwise would have failed it.
    Approval.objects.filter(pk=question.pk).update(created=timezone.now())
    assert "past options.stepTimeout" in (step_timeout_breach(step, options) or "")


def test_cancelling_the_run_ends_the_wait(vendor, celery_worker, owner):
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    question = asked(run)

    assert do_cancel_run(run.pk, "changed my mind")

    question.refresh_from_db()
    call = ToolCall.objects.get(pk=question.tool_call_id)
    assert question.status == "lapsed"
    assert call.status == "done" and json.loads(call.result)["answered"] is False
    refused = post(api(owner), f"/api/questions/{question.pk}/answer", {"answer": "red"})
    assert (refused.status_code, refused.json()) == (409, {"error": f"question {question.pk} is already lapsed"})


def test_the_pages_offer_the_answer_only_to_those_who_may_give_it(celery_worker, client, owner, teammate, staff):
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    question = asked(run)
    answer_url = f"/runs/{run.pk}/questions/{question.pk}/answer/"

    client.force_login(teammate)
    assert client.post(answer_url, {"answer": "red"}).status_code == 404
    assert client.post(f"/questions/{question.pk}/answer/", {"answer": "red"}).status_code == 404
    client.force_login(staff)
    card = client.get(f"/runs/{run.pk}/approvals/").content.decode()
    assert "Which colour should the &lt;b&gt;fence&lt;/b&gt; be?" in card
    assert 'name="answer"' not in card and "may answer it" in card
    client.force_login(owner)
    card = client.get(f"/runs/{run.pk}/approvals/").content.decode()
    assert '<button type="submit" name="answer" value="red">red</button>' in card

    refused = client.post(answer_url, {"answer": "green"}, headers={"HX-Request": "true"}).content.decode()
    assert "the answer must be one of the options: red, blue" in refused
    client.post(answer_url, {"answer": "red"})
    assert wait_for_run(run).status == Run.Status.COMPLETED
    question.refresh_from_db()
    assert (question.status, question.decisions.get().user) == ("answered", owner)


def test_a_hidden_character_in_a_question_is_flagged_and_shown_escaped(celery_worker, client, owner):
    run = do_create_run(register("ask/ask_hidden"), {}, user=owner)
    question = asked(run)

    [listed] = api(owner).get(f"/api/questions?run={run.pk}").json()["questions"]
    assert (listed["hidden_characters"], listed["escaped"]["question"]) == (True, "Delete \\u202eelif.txt?")
    client.force_login(owner)
    card = client.get(f"/runs/{run.pk}/approvals/").content.decode()
    assert "contains hidden characters" in card and "\u202e" not in card
    assert post(api(owner), f"/api/questions/{question.pk}/answer", {"answer": "no"}).status_code == 200


def test_approvers_are_emailed_the_question_and_where_to_answer_it(celery_worker, settings, owner, approver):
    settings.ZENWEB_BASE_URL = "https://zen.example.com"
    settings.ZENWEB_APPROVAL_WEBHOOK_URL = ""
    approver.email, owner.email = "approver@example.com", "owner@example.com"
    approver.save(update_fields=["email"])
    owner.save(update_fields=["email"])
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    question = asked(run)

    [message] = wait_for(lambda: mail.outbox)
    assert message.to == ["approver@example.com"]  # not the starter, who watches the run
    assert message.subject == "[zenweb] a question from step paint: Which colour should the <b>fence</b> be?"
    assert f"Step paint of run {run.pk} (ask_colour v1), started by owner, asks:" in message.body
    assert "Answer with one of: red, blue\n" in message.body
    assert f"Answer on the run page: https://zen.example.com/runs/{run.pk}/\n" in message.body
    assert do_email_approvers(question.pk) == 0  # once


def test_a_run_waiting_for_an_answer_is_not_marked_stuck(celery_worker, owner, settings):
    run = do_create_run(register("ask/ask_colour"), {}, user=owner)
    asked(run)
    settings.ZENWEB_STUCK_AFTER = 60
    run.events.update(created=timezone.now() - timedelta(hours=2))

    assert do_sweep()["stuck"] == 0
    run.refresh_from_db()
    assert run.stuck_reason == "" and not run.events.filter(type="run_stuck").exists()
