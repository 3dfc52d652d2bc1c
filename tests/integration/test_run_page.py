"""The run page's steps: inbox depth, transcripts on demand, token counts."""

from __future__ import annotations

import re

import pytest

from runs import live
from runs.actions import do_create_run
from runs.models import Command, Event, Message, Run, Step, ToolCall
from tests.conftest import register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(celery_worker, owner) -> Run:
    return wait_for_run(do_create_run(register("relay"), {"subject": "tea"}, user=owner))


def test_it_loads_a_steps_transcript_when_opened(run, client, owner):
    client.force_login(owner)
    step = run.steps.exclude(kind="coordinator").first()

    html = client.get(f"/runs/{run.pk}/").content.decode()
    transcript = client.get(f"/runs/{run.pk}/steps/{step.pk}/transcript/").content.decode()

    assert f'hx-get="/runs/{run.pk}/steps/{step.pk}/transcript/"' in html
    assert 'class="role">system' in transcript and 'class="role">assistant' in transcript


def test_it_keeps_transcripts_to_those_who_may_see_the_run(run, client, teammate):
    client.force_login(teammate)
    step = run.steps.first()

    assert client.get(f"/runs/{run.pk}/steps/{step.pk}/transcript/").status_code == 404


def test_it_escapes_what_agents_said_in_a_transcript(run, client, owner):
    step = run.steps.exclude(kind="coordinator").first()
    step.transcript = [{"role": "assistant", "content": "<img src=x onerror=alert(1)>"}]
    step.save()
    client.force_login(owner)

    transcript = client.get(f"/runs/{run.pk}/steps/{step.pk}/transcript/").content.decode()

    assert "<img" not in transcript and "&lt;img src=x onerror=alert(1)&gt;" in transcript


def test_it_shows_inbox_depth_and_tokens(run, client, owner):
    step = run.steps.exclude(kind="coordinator").first()
    Message.objects.create(
        run=run, message_id="msg-x-1", sender="coordinator", recipient=step.step_id, type="info", content="hi"
    )
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert '<td class="inbox">1</td>' in html
    assert 'id="run-tokens"' in html and "coordination overhead" in html


def test_it_shows_inputs_named_like_dict_methods(client, owner):
    # A template's "inputs.items" looks up a key named "items" first: an
    # input called items made the run header fail to render.
    run = Run.objects.create(
        workflow=register("relay"), inputs={"items": "a,b", "keys": "k"}, created_by=owner, status="pending"
    )
    Command.objects.create(text="Run relay for items a,b", created_by=owner, run=run, status="selected")
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/")
    answer = client.get(f"/commands/{run.command_record.pk}/")

    assert page.status_code == 200 and answer.status_code == 200
    for html in (page.content.decode(), answer.content.decode()):
        assert "<code>items=a,b</code>" in html and "<code>keys=k</code>" in html


def test_it_lists_the_newest_tool_calls_oldest_first_with_their_steps(client, owner):
    run = Run.objects.create(workflow=register("relay"), inputs={"subject": "x"}, created_by=owner, status="running")
    first = Step.objects.create(run=run, step_id="first", agent="sender", position=1)
    second = Step.objects.create(run=run, step_id="second", agent="receiver", position=2)
    calls = ToolCall.objects.bulk_create(
        ToolCall(run=run, step=first if n % 2 else second, tool_call_id=f"call-{n}", name=f"tool_{n}")
        for n in range(1, live.TOOL_CALLS_SHOWN + 6)
    )
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    shown = [int(pk) for pk in re.findall(r'<tr id="call-(\d+)"', html)]
    assert shown == [call.pk for call in calls[5:]]  # the newest 200, oldest first
    assert f'Tool calls <span class="muted">({live.TOOL_CALLS_SHOWN + 5})</span>' in html
    cells = re.findall(r'<tr id="call-(\d+)"[^>]*>\s*<td>(.*?)</td>', html)
    steps = {pk: re.sub(r"<[^>]+>", "", cell) for pk, cell in cells}  # the step's id as it reads
    assert steps[str(calls[-1].pk)] == "first"  # call 205: odd
    assert steps[str(calls[5].pk)] == "second"  # call 6: even


def progress_of(html: str) -> str:
    """The run header's step progress, as its text reads."""
    found = re.search(r'<span id="run-progress">(.*?)</span>\s*<span>started by', html, re.S)
    return re.sub(r"<[^>]+>", "", found[1]).strip()


def test_it_counts_only_completed_steps_as_done(client, owner):
    run = Run.objects.create(workflow=register("relay"), created_by=owner, status="cancelled")
    for n, status in enumerate(["completed", "cancelled", "cancelled", "failed", "skipped", "running"]):
        Step.objects.create(run=run, step_id=f"s{n}", agent="worker", status=status)
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert progress_of(html) == "1/6 steps completed, 1 failed, 1 skipped, 2 cancelled"
    assert '<progress max="6" value="1"></progress>' in html
    assert '<span class="step-count status-cancelled">2 cancelled</span>' in html


def test_it_does_not_show_a_cancelled_runs_steps_as_done(client, owner):
    run = Run.objects.create(workflow=register("relay"), created_by=owner, status="cancelled")
    Step.objects.bulk_create(
        [Step(run=run, step_id=f"s{n}", agent="worker", position=n, status="cancelled") for n in range(71)]
    )
    Event.objects.create(run=run, seq=1, type="workflow_end", data={"status": "cancelled"})
    client.force_login(owner)

    page = client.get(f"/runs/{run.pk}/").content.decode()
    # A live update redraws the header from figures summed in SQL.
    update, _ = live.render_update(run.pk, 0)

    for html in (page, update):
        assert progress_of(html) == "0/71 steps completed, 71 cancelled"
        assert '<progress max="71" value="0"></progress>' in html
        assert "71/71" not in html


def test_it_says_a_run_awaiting_approval_has_not_started(client, owner):
    run = Run.objects.create(workflow=register("approvals/wipe"), created_by=owner, status="awaiting_approval")
    client.force_login(owner)

    assert progress_of(client.get(f"/runs/{run.pk}/").content.decode()) == "not started: awaiting approval"


def test_it_keeps_long_inputs_inside_the_run_header(client, owner):
    run = Run.objects.create(
        workflow=register("relay"), inputs={"subject": "x" * 10_000 + "<b>"}, created_by=owner, status="pending"
    )
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert '<span class="run-inputs" id="run-inputs">inputs: <code>subject=' in html
    assert "&lt;b&gt;</code>" in html
