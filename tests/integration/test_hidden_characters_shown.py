"""Issue 45's attack: bidi controls make an approval say something else. A
command holding them is shown escaped and flagged on the approvals page, on
the run page (its events, tool calls and transcripts) and in the API, so an
approver reads what runs."""

from __future__ import annotations

import html as html_lib
import json
import re
import shlex

import pytest

from runs.actions import do_create_run
from runs.actions.approval_requests import ApprovalAsked, request_approval
from runs.models import Approval, Step, ToolCall
from tests.conftest import register
from tests.integration.api_client import api

pytestmark = pytest.mark.django_db

# Displayed, the isolates and the override turn the python3 -c around so that
# it reads as part of the comment after the echo.
RELAYED = "echo ok #\u2067\u2066 ;python3 -c \"import shutil; shutil.rmtree('src')\"\u2069\u202e\u2069"
RAW = ("\u2066", "\u2067", "\u2069", "\u202e")
FLAG = "contains hidden characters"
OVERRIDE = '<span class="hidden-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">\\u202e</span>'


def article(html: str, approval: Approval) -> str:
    found = re.search(rf'<article class="approval" id="approval-{approval.pk}">(.*?)</article>', html, re.S)
    assert found, f"approval {approval.pk} is not on the page"
    return found[1]


@pytest.fixture
def hidden(owner) -> Approval:
    """A destructive run waiting for its approval, whose planned command holds the relayed text."""
    run = do_create_run(register("approvals/hidden_note"), {"note": RELAYED}, user=owner)
    return run.approvals.get()


@pytest.fixture
def relayed(owner) -> Approval:
    """A run_shell call's own approval, as a model's relayed command asks for one."""
    run = do_create_run(register("approvals/wipe"), {}, user=owner)
    asked = ApprovalAsked(
        kind=Approval.Kind.TOOL,
        what="run_shell in step janitor",
        why="wipe is destructive and this run_shell call was not shown when the run was approved",
        subject={"tool": "run_shell", "arguments": {"command": RELAYED}},
        arguments={"command": RELAYED},
        step_id="janitor",
    )
    return request_approval(run, asked)


def test_the_approvals_page_shows_a_hidden_command_escaped_and_flagged(client, approver, hidden, relayed):
    plain = do_create_run(register("approvals/wipe"), {}).approvals.get()
    client.force_login(approver)

    html = client.get("/approvals/").content.decode()

    assert not any(char in html for char in RAW)
    for approval in (hidden, relayed):
        shown = article(html, approval)
        assert '<span class="hidden-flag" role="alert">contains hidden characters: shown escaped</span>' in shown
        assert OVERRIDE in shown
        assert all(f"\\u{ord(char):04x}</span>" in shown for char in RAW)
    # The planned command, in its own order: the rmtree is plainly there.
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", article(html, hidden)))
    assert "#\\u2067\\u2066 ;python3 -c \\\"import shutil; shutil.rmtree('src')\\\"\\u2069\\u202e\\u2069" in text
    assert FLAG not in article(html, plain)


def test_the_api_says_an_approval_holds_hidden_characters_and_gives_it_escaped(approver, owner, hidden, relayed):
    listed = {a["id"]: a for a in api(approver).get("/api/approvals").json()["approvals"]}
    escaped = RELAYED
    for char in RAW:
        escaped = escaped.replace(char, f"\\u{ord(char):04x}")

    assert listed[hidden.pk]["hidden_characters"] is True
    assert listed[hidden.pk]["actions"] == hidden.actions  # unchanged, as it runs
    assert listed[hidden.pk]["escaped"]["arguments"] == {"note": escaped}
    assert listed[hidden.pk]["escaped"]["actions"][0]["arguments"]["command"] == f"echo {shlex.quote(escaped)}"
    assert listed[relayed.pk]["hidden_characters"] is True
    assert listed[relayed.pk]["arguments"] == {"command": RELAYED}
    assert listed[relayed.pk]["escaped"]["arguments"] == {"command": escaped}
    assert listed[relayed.pk]["escaped"]["what"] == "run_shell in step janitor"
    brief = api(owner).get(f"/api/runs/{hidden.run_id}").json()["approvals"]
    assert [a["hidden_characters"] for a in brief] == [True]


def test_the_run_page_shows_hidden_characters_escaped_and_flagged(client, owner, hidden):
    run = hidden.run
    step = Step.objects.create(run=run, step_id="janitor", agent="janitor", position=1)  # as if approved and run
    ToolCall.objects.create(
        run=run, step=step, tool_call_id="call-1", name="run_shell", arguments=json.dumps({"command": RELAYED})
    )
    # As a model sent them: the raw characters, not JSON escapes.
    sent = {"name": "run_shell", "arguments": json.dumps({"command": RELAYED}, ensure_ascii=False)}
    step.transcript = [{"role": "assistant", "content": "", "tool_calls": [{"id": "call-1", "function": sent}]}]
    step.save(update_fields=["transcript"])
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()
    transcript = client.get(f"/runs/{run.pk}/steps/{step.pk}/transcript/").content.decode()

    assert not any(char in html for char in RAW)
    requested = re.search(r'<details class="event type-approval_requested .*?</details>', html, re.S)[0]
    assert FLAG in requested and OVERRIDE in requested
    call_row = re.search(r'<tr id="call-\d+".*?</tr>', html, re.S)[0]
    assert FLAG in call_row and "\\u202e" in call_row  # stored as JSON escapes
    assert not any(char in transcript for char in RAW)
    assert FLAG in transcript and OVERRIDE in transcript


def test_the_run_pages_approvals_card_shows_a_hidden_command_escaped_and_flagged(client, approver, hidden, relayed):
    client.force_login(approver)

    for approval in (hidden, relayed):
        html = client.get(f"/runs/{approval.run_id}/approvals/").content.decode()
        card = re.search(rf'id="run-approval-{approval.pk}"(.*?)</article>', html, re.S)[1]

        assert not any(char in html for char in RAW)
        assert '<span class="hidden-flag" role="alert">contains hidden characters: shown escaped</span>' in card
        assert OVERRIDE in card
