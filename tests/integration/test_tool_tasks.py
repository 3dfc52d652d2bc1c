"""Tool calls as durable tasks: a turn's service-backed calls are queued,
each runs as its own Celery task (in parallel), and the step's next turn
sees every result in the order its model asked for them."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.actions import do_create_run, do_start_run, tool_tasks
from runs.actions import steps as step_actions
from runs.models import Run, Step, ToolCall, ToolExecution
from tests.conftest import assert_gapless, register, wait_for, wait_for_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]


def test_a_turns_calls_run_as_parallel_tasks_and_come_back_in_order(celery_worker):
    run = wait_for_run(do_create_run(register("tools/parallel_calls"), {}))

    assert run.status == Run.Status.COMPLETED, run.error
    calls = list(run.tool_calls.filter(name="run_shell").order_by("id"))
    assert [c.status for c in calls] == ["done"] * 3
    assert [json.loads(c.result)["result"]["output"] for c in calls] == ["first\n", "second\n", "third\n"]
    # They ran side by side: one after another they would span at least the
    # sum of their durations; and the slow first call finished last.
    first, second, third = calls
    span = max(c.finished for c in calls) - min(c.started for c in calls)
    assert span.total_seconds() * 1000 < sum(c.duration_ms for c in calls)
    assert first.finished > max(second.finished, third.finished)
    # The model got the results in the order it asked for them.
    step = run.steps.get(step_id="fan")
    results = [m["content"] for m in step.transcript if m["role"] == "tool"]
    assert results == [c.result for c in calls]
    # Each call's lifecycle is in the event log: queued at the turn, started
    # by a worker, then its result; the next turn only after all three.
    types = list(run.events.filter(step_id="fan").order_by("seq").values_list("type", flat=True))
    assert types.count("tool_started") == 3 and types.count("tool_result") == 3
    last_result = max(i for i, t in enumerate(types) if t == "tool_result")
    assert types.index("agent_turn", types.index("tool_started")) > last_result
    ends = run.events.filter(type="tool_call", step_id="fan", data__phase="end")
    assert all(e.data.get("queued") for e in ends)
    assert_gapless(run)


def test_a_call_past_its_timeout_ends_timed_out_and_the_step_goes_on(celery_worker):
    run = wait_for_run(do_create_run(register("tools/slow_call"), {}))

    assert run.status == Run.Status.COMPLETED, run.error
    call = run.tool_calls.get(name="run_shell")
    assert call.status == ToolCall.Status.TIMED_OUT and not call.ok
    assert call.error_kind == "timeout"
    assert "did not finish within 0.5s (toolTimeout)" in call.result
    assert json.loads(call.result.split("retry_hint: ", 1)[1])["kind"] == "timeout"
    assert run.steps.get(step_id="slow").output == "gave up waiting"


@pytest.fixture
def queued(settings, tmp_path, owner) -> ToolCall:
    """A step whose first turn queued one run_shell call; no worker runs it:
    the test plays the workers."""
    settings.ZENWEB_WORKSPACES = tmp_path
    run = do_create_run(register("tools/appender_tasks"), {}, user=owner)
    do_start_run(run.pk)
    step = Step.objects.get(run=run, step_id="append")
    step_actions.do_step_turn(step.pk, 1)
    return ToolCall.objects.get(step=step)


def effects(settings, call: ToolCall) -> str:
    return (settings.ZENWEB_WORKSPACES / f"run-{call.run_id}" / "effects.log").read_text()


class WorkerDied(Exception):
    """Stands in for a worker killed at a chosen point of a call."""


def _expire(call: ToolCall) -> None:
    ToolCall.objects.filter(pk=call.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))


def test_the_turn_frees_its_worker_with_the_call_queued(queued):
    assert queued.status == ToolCall.Status.QUEUED
    step = queued.step
    step.refresh_from_db()
    assert step.turns == 1 and step.status == Step.Status.RUNNING
    placeholder = [m["content"] for m in step.transcript if m["role"] == "tool"]
    assert placeholder == ["queued: run_shell runs as a task; its result replaces this text"]


def test_a_finished_call_whose_worker_died_before_delivering_is_not_run_again(queued, settings, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(tool_tasks, "_finish", lambda *a, **k: (_ for _ in ()).throw(WorkerDied()))
        with pytest.raises(WorkerDied):
            tool_tasks.do_execute_tool_call(queued.pk)
    assert effects(settings, queued) == "once\n"
    queued.refresh_from_db()
    assert queued.status == ToolCall.Status.RUNNING

    _expire(queued)
    assert tool_tasks.sweep_tool_calls(timezone.now()) == 1
    queued.refresh_from_db()
    assert queued.status == ToolCall.Status.QUEUED
    tool_tasks.do_execute_tool_call(queued.pk)

    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (ToolCall.Status.DONE, 2)
    assert json.loads(queued.result) == {"result": {"exit_code": 0, "output": "1\n"}}
    assert effects(settings, queued) == "once\n"  # the journaled result, not a second run
    assert queued.run.events.filter(type="lease_expired", data__tool_call_id=queued.tool_call_id).count() == 1


def test_a_call_lost_with_its_worker_twice_fails_and_the_step_goes_on(queued, monkeypatch):
    for _ in range(tool_tasks.MAX_ATTEMPTS):
        with monkeypatch.context() as patch:
            patch.setattr(tool_tasks, "_within", lambda *a, **k: (_ for _ in ()).throw(WorkerDied()))
            with pytest.raises(WorkerDied):
                tool_tasks.do_execute_tool_call(queued.pk)
        _expire(queued)
        tool_tasks.sweep_tool_calls(timezone.now())

    queued.refresh_from_db()
    assert queued.status == ToolCall.Status.FAILED and queued.error_kind == "unavailable"
    assert "lost with its worker 2 times" in queued.result


def test_a_duplicate_task_does_nothing(queued, settings):
    tool_tasks.do_execute_tool_call(queued.pk)
    tool_tasks.do_execute_tool_call(queued.pk)

    queued.refresh_from_db()
    assert (queued.status, queued.attempts) == (ToolCall.Status.DONE, 1)
    assert effects(settings, queued) == "once\n"
    assert ToolExecution.objects.get(step=queued.step).attempts == 1


def test_a_call_queued_when_its_run_is_cancelled_never_runs(queued, settings):
    from runs.actions import do_cancel_run

    do_cancel_run(queued.run_id, "changed my mind")
    tool_tasks.do_execute_tool_call(queued.pk)

    queued.refresh_from_db()
    assert queued.status == ToolCall.Status.CANCELLED
    assert queued.result.startswith("error: run_shell was stopped: the run ended cancelled")
    assert not (settings.ZENWEB_WORKSPACES / f"run-{queued.run_id}" / "effects.log").exists()
    assert queued.run.events.order_by("-seq").values_list("type", flat=True)[0] == "workflow_end"


def test_a_cancel_stops_a_call_that_is_running_and_kills_its_command(settings, tmp_path, owner):
    import threading

    from runs.actions import do_cancel_run

    settings.ZENWEB_WORKSPACES = tmp_path
    run = do_create_run(register("tools/long_call"), {}, user=owner)
    do_start_run(run.pk)
    step_actions.do_step_turn(Step.objects.get(run=run, step_id="wait").pk, 1)
    call = ToolCall.objects.get(run=run)
    workspace = tmp_path / f"run-{run.pk}"
    worker = threading.Thread(target=tool_tasks.do_execute_tool_call, args=(call.pk,))
    worker.start()
    wait_for(lambda: (workspace / "began.txt").exists())

    do_cancel_run(run.pk, "changed my mind")
    worker.join(30)  # the command would sleep 60 s

    assert not worker.is_alive()
    call.refresh_from_db()
    assert (call.status, call.error_kind) == (ToolCall.Status.CANCELLED, "unavailable")
    assert call.result.startswith("error: run_shell was stopped: the run ended cancelled")
    assert call.lease_owner == "" and call.finished is not None
    # The call's end is recorded before the run's end, which stays the last event.
    assert list(run.events.order_by("-seq").values_list("type", flat=True)[:2]) == ["workflow_end", "tool_result"]
    assert run.events.filter(type="tool_result").count() == 1
    assert list(ToolExecution.objects.filter(step__run=run).values_list("status", flat=True)) == ["cancelled"]
    # The command was killed, not left to finish in the background.
    time.sleep(1.5)
    assert not (workspace / "ended.txt").exists()
    assert not subprocess.run(["pgrep", "-f", "sleep 60 && echo done"], capture_output=True).stdout


def test_the_run_page_shows_each_call_queued_running_then_done(queued, client, owner):
    from runs.live import render_update

    client.force_login(owner)
    row = f'id="call-{queued.pk}" class="call-queued"'
    assert row in client.get(f"/runs/{queued.run_id}/").content.decode()
    seen = queued.run.events.order_by("-seq").values_list("seq", flat=True).first()

    claimed = tool_tasks._claim(queued.pk, "worker-a")
    assert claimed is not None and claimed.status == ToolCall.Status.RUNNING
    # The live update after tool_started redraws the row as running.
    html, seen = render_update(queued.run_id, seen)
    assert f'id="call-{queued.pk}" class="call-running"' in html and ">running" in html

    ToolCall.objects.filter(pk=queued.pk).update(status=ToolCall.Status.QUEUED, lease_owner="")
    tool_tasks.do_execute_tool_call(queued.pk)
    html, _ = render_update(queued.run_id, seen)
    assert f'id="call-{queued.pk}" class="call-done"' in html and "exit_code&quot;: 0" in html
