"""Approvers are told when something waits for them: an approval, or a
question a step asks (ask_person), which they may answer.

When an approval is requested, ``queue_notices`` (called inside the
transaction that creates it) queues, for after commit, one email to each
person who may decide it and, when ZENWEB_APPROVAL_WEBHOOK_URL is set, one
signed JSON POST. The Celery tasks of runs/tasks.py send them; a failure is
logged and recorded as a ``notification_failed`` event of the run, and never
changes the run. docs/commands-and-approvals.md, "Notifications", has the
payload and how a receiver checks its signature.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.urls import reverse

from agents.events import Event as RuntimeEvent
from agents.events.tool_events import NotificationFailed
from agents.hidden_characters import escape_hidden
from runs import queue
from runs.models import Approval
from runs.store.sql import store
from runs.store.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

# The header that carries the webhook's signature: "t=<unix time>,v1=<hex>".
SIGNATURE_HEADER = "X-Zenweb-Signature"
# Seconds one POST may take.
WEBHOOK_TIMEOUT = 10.0
SUBJECT_CHARS = 120
# The backend that holds users' and groups' permissions (settings.AUTHENTICATION_BACKENDS).
PERMISSIONS_BACKEND = "django.contrib.auth.backends.ModelBackend"


class WebhookFailed(Exception):
    """A POST the receiver did not accept; the message says how (never the URL or the secret)."""


def queue_notices(approval: Approval) -> None:
    """Queue the notices of a new approval request for after commit."""
    queue.send_after_commit(queue.EMAIL_APPROVERS, approval.pk)
    if settings.ZENWEB_APPROVAL_WEBHOOK_URL:
        queue.send_after_commit(queue.POST_APPROVAL_WEBHOOK, approval.pk)


def queue_question_notice(approval: Approval) -> None:
    """Queue the emails about a step's question (ask_person) for after
    commit: approvers may answer it. No webhook: its payload is an approval's."""
    queue.send_after_commit(queue.EMAIL_APPROVERS, approval.pk)


def approvers_to_tell(approval: Approval) -> list:
    """The active users with an email address who may decide ``approval``:
    those with the approve permission (through a group or as superusers),
    not the person who asked."""
    users = get_user_model().objects.with_perm(
        "runs.decide_approval", is_active=True, include_superusers=True, backend=PERMISSIONS_BACKEND
    )
    if approval.requested_by_id is not None:
        users = users.exclude(pk=approval.requested_by_id)
    return list(users.exclude(email="").order_by("pk"))


def run_link(run_id: int) -> str:
    """The run page's address: absolute under ZENWEB_BASE_URL, else its path."""
    return settings.ZENWEB_BASE_URL + reverse("runs:detail", args=[run_id])


def do_email_approvers(approval_id: int) -> int:
    """Email each approver of ``approval_id`` (one message each, so no one
    sees the others' addresses), once: the task that claims ``emailed_at``
    sends, a redelivered one does nothing. Returns how many were sent. A
    failure of the mail server is logged and recorded on the run (not tried
    again: some may have gone out)."""
    approval = _waiting(approval_id)
    recipients = approvers_to_tell(approval) if approval else []
    if not approval or not recipients or not _claim_emails(approval_id):
        return 0
    subject, body = email_text(approval)
    messages = [EmailMessage(subject, body, to=[user.email]) for user in recipients]
    try:
        sent = get_connection().send_messages(messages) or 0
    except Exception as exc:  # an SMTP error, a refused connection, a bad address: none may fail the run
        record_failure(approval, "email", f"{type(exc).__name__}: {exc}", attempts=1)
        return 0
    log.info("approval %d: emailed %d approver(s)", approval.pk, sent)
    return sent


def email_text(approval: Approval) -> tuple[str, str]:
    """The subject and plain-text body of the email about ``approval``."""
    if approval.kind == Approval.Kind.QUESTION:
        return question_email_text(approval)
    run = approval.run
    what = escape_hidden(" ".join(approval.what.split()))
    subject = f"[zenweb] approval needed: {what}"[:SUBJECT_CHARS]
    link = run_link(run.pk)
    lines = [
        f"{_requester(approval) or 'Someone'} asks for an approval in run {run.pk}"
        f" ({run.workflow.name} v{run.workflow.version}).",
        "",
        f"What: {escape_hidden(approval.what)}",
        f"Why: {escape_hidden(approval.why)}",
    ]
    if tool := _tool(approval):
        lines.append(f"Tool: {tool}")
    lines += ["Arguments:", _json_block(approval.arguments)]
    if approval.actions:
        lines += ["Planned calls with effects:", _json_block(approval.actions)]
    lines += [f"Arguments hash: {approval.arguments_hash}", f"Approvals required: {approval.required_approvals}"]
    if approval.expires_at:
        lines.append(f"Lapses at: {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC")
    lines += ["", f"Decide on the run page: {link}"]
    if not settings.ZENWEB_BASE_URL:
        lines.append("(ZENWEB_BASE_URL is not set, so this is only the page's path on the zenweb server.)")
    return subject, "\n".join(lines) + "\n"


def webhook_payload(approval: Approval, sent_at: int) -> dict[str, Any]:
    """What the webhook receives about ``approval`` (JSON): the exact arguments as stored."""
    run = approval.run
    return {
        "event": "approval_requested",
        "delivery": f"approval-{approval.pk}",
        "approval_id": approval.pk,
        "run_id": run.pk,
        "workflow": {"name": run.workflow.name, "version": run.workflow.version},
        "kind": approval.kind,
        "what": approval.what,
        "why": approval.why,
        "tool": _tool(approval),
        "arguments": approval.arguments,
        "actions": approval.actions,
        "arguments_hash": approval.arguments_hash,
        "required_approvals": approval.required_approvals,
        "requested_by": _requester(approval),
        "requested_at": approval.created.isoformat(),
        "expires_at": approval.expires_at.isoformat() if approval.expires_at else None,
        "link": run_link(run.pk),
        "sent_at": sent_at,
    }


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 under ``secret`` of "<timestamp>." followed by the body."""
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def do_post_webhook(approval_id: int) -> None:
    """POST the signed payload of ``approval_id`` to the webhook; raise
    WebhookFailed unless the receiver answers 2xx. Nothing is sent for an
    approval decided (or gone) before the task ran."""
    approval = _waiting(approval_id)
    if approval is None:
        return
    sent_at = int(time.time())
    body = json.dumps(webhook_payload(approval, sent_at), sort_keys=True, separators=(",", ":")).encode()
    digest = signature(settings.ZENWEB_APPROVAL_WEBHOOK_SECRET, sent_at, body)
    request = urllib.request.Request(
        settings.ZENWEB_APPROVAL_WEBHOOK_URL,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "zenweb",
            SIGNATURE_HEADER: f"t={sent_at},v1={digest}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT) as response:  # noqa: S310 (the operator's URL)
            status = response.status
    except urllib.error.HTTPError as exc:
        raise WebhookFailed(f"the receiver answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise WebhookFailed(f"could not reach the receiver: {reason}") from None
    if not 200 <= status < 300:
        raise WebhookFailed(f"the receiver answered {status}")
    log.info("approval %d: webhook delivered", approval.pk)


def retry_delay(attempt: int) -> float:
    """Seconds before the webhook's next try after failed try ``attempt`` (1, 2, ...): tripled each time."""
    return float(settings.ZENWEB_APPROVAL_WEBHOOK_RETRY_SECONDS * 3 ** (attempt - 1))


def record_webhook_failure(approval_id: int, error: str, attempts: int) -> None:
    approval = Approval.objects.filter(pk=approval_id).first()
    if approval is not None:
        record_failure(approval, "webhook", error, attempts)


def record_failure(approval: Approval, channel: str, error: str, attempts: int) -> None:
    """Log a notice that could not be sent and say so in the run's events."""
    log.warning("approval %d: the %s notice failed after %d attempt(s): %s", approval.pk, channel, attempts, error)
    failed = NotificationFailed(approval_id=approval.pk, channel=channel, error=error[:500], attempts=attempts)
    with UnitOfWork(approval.run_id) as uow:
        uow.sink.emit(RuntimeEvent.of(failed, approval.step_id))


def question_email_text(approval: Approval) -> tuple[str, str]:
    """The subject and body of the email about a step's question: the
    question and its options (hidden characters escaped) and where to answer."""
    run = approval.run
    question = escape_hidden(approval.why)
    subject = f"[zenweb] a question from step {approval.step_id}: {' '.join(question.split())}"[:SUBJECT_CHARS]
    options = [escape_hidden(str(option)) for option in approval.arguments.get("options") or []]
    lines = [
        f"Step {approval.step_id} of run {run.pk} ({run.workflow.name} v{run.workflow.version}),"
        f" started by {_requester(approval) or 'the command line'}, asks:",
        "",
        question,
        "",
        f"Answer with one of: {', '.join(options)}" if options else "Any text answers it.",
    ]
    if approval.expires_at:
        lines.append(f"No answer by {approval.expires_at:%Y-%m-%d %H:%M:%S} UTC: the step goes on without one.")
    lines += ["", f"Answer on the run page: {run_link(run.pk)}"]
    if not settings.ZENWEB_BASE_URL:
        lines.append("(ZENWEB_BASE_URL is not set, so this is only the page's path on the zenweb server.)")
    return subject, "\n".join(lines) + "\n"


def _claim_emails(approval_id: int) -> bool:
    """Whether this task is the one to email the approvers (the first to ask)."""
    return store().mark_approval_emailed(approval_id)


def _waiting(approval_id: int) -> Approval | None:
    """The approval, if it still waits for a decision."""
    approvals = Approval.objects.select_related("run__workflow", "requested_by", "tool_call")
    return approvals.filter(pk=approval_id, status=Approval.Status.PENDING).first()


def _requester(approval: Approval) -> str:
    return approval.requested_by.get_username() if approval.requested_by else ""


def _tool(approval: Approval) -> str | None:
    return approval.tool_call.name if approval.tool_call else None


def _json_block(value: Any) -> str:
    text = escape_hidden(json.dumps(value, indent=2, ensure_ascii=False, default=str))
    return "\n".join("    " + line for line in text.splitlines())
