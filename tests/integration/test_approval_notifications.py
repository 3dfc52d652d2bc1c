"""Approvers are told when something waits for them: one email each (not
the requester) and, when configured, one signed webhook POST, each with the
run page's link; a failing receiver is retried and never changes the run."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend

from runs import queue
from runs.actions import do_create_run
from runs.actions.approvals import do_decide
from runs.actions.notifications import SIGNATURE_HEADER, do_email_approvers, email_text
from runs.models import Approval, Run, Step
from tests.conftest import register, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "a-shared-secret-of-some-length"
BASE_URL = "https://zen.example.com"


class Receiver:
    """A local webhook receiver: answers each POST with the next of
    ``statuses`` (the last one repeated) and keeps what it was sent."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.posts: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append((dict(self.headers), body))
                status = receiver.statuses[min(len(receiver.posts), len(receiver.statuses)) - 1]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/zenweb"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def verified(headers: dict[str, str], body: bytes) -> dict:
    """The payload, once its signature checks out as a receiver checks it."""
    fields = dict(part.split("=", 1) for part in headers[SIGNATURE_HEADER].split(","))
    signed = fields["t"].encode() + b"." + body
    expected = hmac.new(SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(expected, fields["v1"]), "the signature does not match the body"
    payload = json.loads(body)
    assert payload["sent_at"] == int(fields["t"])
    return payload


@pytest.fixture
def webhook(settings):
    """Point zenweb at a receiver; ``webhook(statuses)`` starts one."""
    settings.ZENWEB_BASE_URL = BASE_URL
    settings.ZENWEB_APPROVAL_WEBHOOK_SECRET = SECRET
    settings.ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS = 0.05
    receivers: list[Receiver] = []

    def start(statuses: list[int]) -> Receiver:
        receiver = Receiver(statuses).__enter__()
        receivers.append(receiver)
        settings.ZENWEB_APPROVAL_WEBHOOK_URL = receiver.url
        return receiver

    yield start
    for receiver in receivers:
        receiver.__exit__()


def with_email(user, address: str):
    user.email = address
    user.save(update_fields=["email"])
    return user


def gated_run(owner) -> tuple[Run, Approval]:
    run = do_create_run(register("approvals/gated"), {}, user=owner)
    approval = wait_for(lambda: Approval.objects.filter(run=run, tool_call__isnull=False).first())
    return run, approval


def test_a_waiting_run_emails_each_approver_once_and_posts_one_signed_webhook(
    vendor, celery_worker, webhook, django_user_model, teammate, approver, second_approver
):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    for user in (teammate, approver, second_approver, root):
        with_email(user, f"{user.username}@example.com")
    receiver = webhook([200])

    # The requester may decide others' requests, not this one: they are not told.
    run, approval = gated_run(approver)

    wait_for(lambda: len(mail.outbox) >= 2 and receiver.posts)
    # One message each to those who may decide; not someone without the permission.
    assert sorted(address for message in mail.outbox for address in message.to) == [
        "approver2@example.com",
        "root@example.com",
    ]
    link = f"{BASE_URL}/runs/{run.pk}/"
    for message in mail.outbox:
        assert link in message.body
        assert "run_shell" in message.body
        assert "echo built >> build.log && cat build.log" in message.body
    [(headers, body)] = receiver.posts
    payload = verified(headers, body)
    assert payload["link"] == link
    assert (payload["run_id"], payload["approval_id"], payload["workflow"]["name"]) == (run.pk, approval.pk, "gated")
    assert (payload["tool"], payload["arguments"]) == ("run_shell", approval.arguments)
    assert payload["requested_by"] == "approver"
    assert SECRET not in body.decode()
    # The run waits for the decision as it would without notices.
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert not run.events.filter(type="notification_failed").exists()


def test_a_failing_receiver_is_retried_then_recorded_and_the_run_is_unaffected(
    vendor, celery_worker, webhook, settings, owner, approver
):
    settings.ZENWEB_APPROVAL_WEBHOOK_ATTEMPTS = 3
    receiver = webhook([500])

    run, approval = gated_run(owner)

    event = wait_for(lambda: run.events.filter(type="notification_failed").first())
    assert event.data == {
        "approval_id": approval.pk,
        "channel": "webhook",
        "error": "the receiver answered 500",
        "attempts": 3,
    }
    assert event.step_id == "build"
    # Three tries, each signed anew, all the same delivery.
    assert len(receiver.posts) == 3
    assert {verified(headers, body)["delivery"] for headers, body in receiver.posts} == {f"approval-{approval.pk}"}
    assert SECRET not in json.dumps(event.data)
    # The approval still waits and can be decided; the run goes on.
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    do_decide(approval.pk, approver, "reject", "not today")
    wait_for(lambda: Step.objects.filter(run=run, step_id="build").exclude(status="running").exists(), timeout=30)


def test_a_receiver_that_recovers_gets_the_post_on_a_retry(celery_worker, webhook, owner):
    receiver = webhook([503, 200])

    run, approval = gated_run(owner)

    wait_for(lambda: len(receiver.posts) == 2)
    assert [verified(headers, body)["approval_id"] for headers, body in receiver.posts] == [approval.pk] * 2
    assert not run.events.filter(type="notification_failed").exists()


def test_with_no_webhook_url_only_the_emails_are_queued(recorded_tasks, settings, owner):
    settings.ZENWEB_APPROVAL_WEBHOOK_URL = ""

    run = do_create_run(register("approvals/wipe"), {}, user=owner)

    approval = run.approvals.get()
    notices = (queue.EMAIL_APPROVERS, queue.POST_APPROVAL_WEBHOOK)
    queued = [(name, args) for name, args in recorded_tasks if name in notices]
    assert queued == [(queue.EMAIL_APPROVERS, (approval.pk,))]


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise ConnectionRefusedError("mail server down")


def test_a_mail_server_that_refuses_is_recorded_and_the_run_waits_on(celery_worker, settings, owner, approver):
    settings.EMAIL_BACKEND = f"{__name__}.RefusingBackend"
    with_email(approver, "approver@example.com")

    run = do_create_run(register("approvals/wipe"), {}, user=owner)

    event = wait_for(lambda: run.events.filter(type="notification_failed").first())
    assert (event.data["channel"], event.data["error"]) == ("email", "ConnectionRefusedError: mail server down")
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL


def test_a_redelivered_email_task_sends_nothing_again(recorded_tasks, owner, approver):
    with_email(approver, "approver@example.com")
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    approval = run.approvals.get()

    assert do_email_approvers(approval.pk) == 1
    assert do_email_approvers(approval.pk) == 0

    assert [message.to for message in mail.outbox] == [["approver@example.com"]]


def test_the_email_says_when_the_link_is_only_a_path(recorded_tasks, settings, owner):
    settings.ZENWEB_BASE_URL = ""
    settings.ZENWEB_APPROVAL_WEBHOOK_URL = ""
    run = do_create_run(register("approvals/wipe"), {}, user=owner)

    subject, body = email_text(run.approvals.get())

    assert subject.startswith("[zenweb] approval needed: run workflow wipe")
    assert f"Decide on the run page: /runs/{run.pk}/\n" in body
    assert "ZENWEB_BASE_URL is not set" in body
    assert "owner asks for an approval" in body
