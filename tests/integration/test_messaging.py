"""Every drop reason, wake cycles, resume, cancel kind and failure policies,
through a real worker. Each drop is exactly one message_dropped event and
the sender's tool result says `dropped: <reason>`."""

from __future__ import annotations

import json

import pytest

from runs.actions import do_create_run
from runs.models import Message, Run, Step
from tests.conftest import event_types, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def run_of(name: str, **inputs) -> Run:
    return wait_for_run(do_create_run(register(f"messaging/{name}"), inputs))


def drops(run: Run) -> list[dict]:
    return [event.data for event in run.events.filter(type="message_dropped").order_by("seq")]


def results(run: Run, step_id: str, tool: str = "send_message") -> list[str]:
    """What became of each message, as ``queued: <id>`` or ``dropped: <reason>``."""
    answers = run.tool_calls.filter(step__step_id=step_id, name=tool).values_list("result", flat=True)
    said = [json.loads(answer)["result"] for answer in answers]
    return [f"{s['status']}: {s['message_id'] if s['status'] == 'queued' else s['reason']}" for s in said]


def test_it_rejects_the_newest_message_when_a_mailbox_is_full(celery_worker, settings):
    settings.ZENWEB_MAX_MAILBOX_SIZE = 2

    run = run_of("burst")

    assert results(run, "chatty") == ["queued: msg-send-1", "queued: msg-send-2", "dropped: mailbox-full"]
    assert drops(run) == [
        {
            "reason": "mailbox-full",
            "from": "chatty",
            "to": "coordinator",
            "msg_type": "info",
            "message_id": "msg-send-3",
        }
    ]
    assert Message.objects.get(run=run, message_id="msg-send-3").drop_reason == "mailbox-full"
    assert run.status == Run.Status.COMPLETED


def test_it_drops_what_is_sent_after_finalize(celery_worker):
    run = run_of("early_finalize")

    assert results(run, "talker") == ["queued: msg-send-1", "dropped: mailbox-closed-by-finalize"]
    assert [d["reason"] for d in drops(run)] == ["mailbox-closed-by-finalize"]
    assert run.result == "done early"


def test_it_stops_waking_the_coordinator_past_its_cap(celery_worker, settings):
    settings.ZENWEB_COORDINATOR_WAKE_CYCLES = 2

    run = run_of("many_wakes")

    warning = run.events.get(type="max_wake_cycles_warning")
    assert (warning.step_id, warning.data) == ("coordinator", {"cycle": 1, "max": 2})
    assert results(run, "talker")[:2] == ["queued: msg-send-1", "queued: msg-send-2"]
    assert results(run, "talker")[-1] == "dropped: max-wake-cycles"
    # m3 was unread when the cap closed the mailbox, or sent after: either
    # way m3 and m4 each drop once.
    assert sorted(d["message_id"] for d in drops(run)) == ["msg-send-3", "msg-send-4"]
    assert {d["reason"] for d in drops(run)} == {"max-wake-cycles"}
    assert run.status == Run.Status.COMPLETED


def test_it_wakes_a_step_for_a_message_that_arrived_after_its_answer(celery_worker):
    run = run_of("late_news")

    reader = run.steps.get(step_id="reader")
    assert reader.output == "reader read: late news"
    assert reader.wake_cycles == 1
    assert event_types(run, step_id="reader") == [
        "step_start",
        "agent_turn",
        "agent_wake",
        "agent_inbox_drain",
        "agent_turn",
        "step_end",
    ]
    assert drops(run) == []


def test_it_drops_late_messages_once_a_step_is_out_of_wake_cycles(celery_worker, settings):
    settings.ZENWEB_STEP_WAKE_CYCLES = 0

    run = run_of("late_news")

    assert run.steps.get(step_id="reader").output == "reader first answer"
    assert drops(run) == [
        {
            "reason": "max-wake-cycles",
            "from": "coordinator",
            "to": "reader",
            "msg_type": "info",
            "message_id": "msg-fwd-2",
        }
    ]


def test_it_drops_messages_held_past_the_hold_timeout(celery_worker, settings):
    settings.ZENWEB_HOLD_TIMEOUT = 0.5

    run = run_of("held_too_long")

    reader = run.steps.get(step_id="reader")
    assert reader.output == "reader read: one"
    assert [(d["reason"], d["to"]) for d in drops(run)] == [("hold-timeout", "reader")]
    assert Message.objects.get(run=run, content="two").drop_reason == "hold-timeout"


def test_it_resumes_a_finished_step_and_routes_its_reply_back(celery_worker):
    run = run_of("resume")

    assert run.status == Run.Status.COMPLETED
    assert event_types(run, step_id="draft")[-5:] == [
        "resume_started",
        "agent_inbox_drain",
        "agent_turn",
        "message_sent",
        "resume_completed",
    ]
    reply = Message.objects.get(run=run, sender="draft")
    assert (reply.type, reply.recipient) == ("resume_reply", "coordinator")
    assert reply.content == "resumed, and yes: are the prices current?"
    narrations = [e.data["text"] for e in run.events.filter(type="coordinator_narration")]
    assert "draft says: resumed, and yes: are the prices current?" in narrations
    assert run.steps.get(step_id="draft").output == "draft: three laptops"
    assert drops(run) == []


def test_it_stops_a_step_sent_a_cancel_and_cancels_its_dependents(celery_worker):
    run = run_of("cancel_kind")

    statuses = dict(run.steps.values_list("step_id", "status"))
    assert statuses["worker"] == Step.Status.CANCELLED
    assert statuses["after"] == Step.Status.CANCELLED
    assert statuses["trigger"] == Step.Status.COMPLETED
    cancelled = run.events.get(type="step_cancelled")
    assert (cancelled.step_id, cancelled.data["reason"]) == ("worker", "stop now")
    assert "agent_turn" in event_types(run, step_id="worker")  # it stopped at a turn boundary, not mid-turn
    assert run.status == Run.Status.PARTIAL
    assert event_types(run)[-1] == "workflow_end"


def test_it_skips_dependents_and_lets_the_rest_finish_under_skip_dependents(celery_worker):
    run = wait_for_run(do_create_run(register("messaging/policy_skip_dependents"), {}))

    statuses = dict(run.steps.filter(kind="step").values_list("step_id", "status"))
    assert statuses == {"broken": "failed", "dependent": "skipped", "slow": "completed"}
    assert run.status == Run.Status.PARTIAL
    assert run.events.get(type="step_skipped").data == {"reason": "dependency broken failed", "status": "skipped"}


def test_it_cancels_everything_unfinished_under_abort(celery_worker):
    run = wait_for_run(do_create_run(register("messaging/policy_abort"), {}))

    statuses = dict(run.steps.filter(kind="step").values_list("step_id", "status"))
    assert statuses == {"broken": "failed", "dependent": "cancelled", "slow": "cancelled"}
    assert run.status == Run.Status.FAILED
    assert "slow done" not in [s.output for s in run.steps.all()]
    assert event_types(run)[-1] == "workflow_end"


def test_it_takes_the_mailbox_cap_from_the_workflow_options(celery_worker):
    run = run_of("burst_capped")

    assert results(run, "chatty") == ["queued: msg-send-1", "dropped: mailbox-full"]
    assert [d["reason"] for d in drops(run)] == ["mailbox-full"]
